// Bindings of the header grammar's PCRE2 matcher (ext/core/header_match.hpp): a batch of lines in, per line
// the spans worker/digest/header_rows.py reads, or None where the line is for Python's `re`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "header_match.hpp"
#include "register.hpp"

namespace py = pybind11;

namespace ribbon {

namespace {

// One line's reading: per text group its (start, end) where it matched text, else None; then per start group
// its start (-1: unset). None where the line is not ASCII or PCRE2 stopped short.
py::object read_one(HeaderMatcher& matcher, PyObject* line, const std::vector<int>& texts,
                    const std::vector<int>& starts, std::vector<int64_t>& spans) {
  if (!PyUnicode_Check(line)) throw py::type_error("HeaderMatcher.read: every line must be a str");
  if (!PyUnicode_IS_ASCII(line)) return py::none();
  const std::string_view subject(static_cast<const char*>(PyUnicode_DATA(line)),
                                 static_cast<size_t>(PyUnicode_GET_LENGTH(line)));
  if (matcher.match(subject, spans) != 1) return py::none();
  py::tuple out(texts.size() + starts.size());
  size_t at = 0;
  for (const int g : texts) {
    const int64_t a = spans[2 * static_cast<size_t>(g)], b = spans[2 * static_cast<size_t>(g) + 1];
    out[at++] = (a >= 0 && b > a) ? py::object(py::make_tuple(a, b)) : py::none();
  }
  for (const int g : starts) out[at++] = py::int_(spans[2 * static_cast<size_t>(g)]);
  return std::move(out);
}

std::vector<int> checked(const HeaderMatcher& matcher, const std::vector<int>& groups) {
  for (const int g : groups) {
    if (g < 0 || static_cast<uint32_t>(g) > matcher.groups()) {
      throw std::invalid_argument("HeaderMatcher.read: no group " + std::to_string(g));
    }
  }
  return groups;
}

}  // namespace

void register_header(py::module_& m) {
  py::class_<HeaderMatcher>(m, "HeaderMatcher",
                            "A pattern compiled by PCRE2 and its JIT, matched anchored on ASCII lines.")
      .def(py::init<std::string_view>(), py::arg("pattern"))
      .def_property_readonly("groups", &HeaderMatcher::groups)
      .def("group_number", &HeaderMatcher::group_number, py::arg("name"))
      .def(
          "read",
          [](HeaderMatcher& self, const py::list& lines, const std::vector<int>& texts,
             const std::vector<int>& starts) {
            const std::vector<int> t = checked(self, texts), s = checked(self, starts);
            std::vector<int64_t> spans;
            py::list out(lines.size());
            size_t i = 0;
            for (const py::handle line : lines) out[i++] = read_one(self, line.ptr(), t, s, spans);
            return out;
          },
          py::arg("lines"), py::arg("texts"), py::arg("starts"),
          "Per line: a tuple of, per group of `texts`, its (start, end) where it matched text, else None, then "
          "per group of `starts` its start (-1: unset); None where the line is not ASCII or the match stopped "
          "short (a PCRE2 limit): the caller reads that line with Python's re.");
}

}  // namespace ribbon
