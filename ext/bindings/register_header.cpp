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

PyObject* span(int64_t a, int64_t b) {
  PyObject* t = PyTuple_New(2);
  if (t == nullptr) throw py::error_already_set();
  PyTuple_SET_ITEM(t, 0, PyLong_FromLongLong(a));
  PyTuple_SET_ITEM(t, 1, PyLong_FromLongLong(b));
  return t;
}

// One line's reading: per group list of `firsts` the (start, end) of its first group that matched text, else
// None; then per group of `starts` its start (-1: unset). None where the line is not ASCII or PCRE2 stopped
// short. Built with the C API: after the match itself, this is most of a call's cost.
py::object read_one(HeaderMatcher& matcher, PyObject* line, const std::vector<std::vector<int>>& firsts,
                    const std::vector<int>& starts, std::vector<int64_t>& spans) {
  if (!PyUnicode_Check(line)) throw py::type_error("HeaderMatcher.read: every line must be a str");
  if (!PyUnicode_IS_ASCII(line)) return py::none();
  const std::string_view subject(static_cast<const char*>(PyUnicode_DATA(line)),
                                 static_cast<size_t>(PyUnicode_GET_LENGTH(line)));
  if (matcher.match(subject, spans) != 1) return py::none();
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(firsts.size() + starts.size()));
  if (out == nullptr) throw py::error_already_set();
  auto result = py::reinterpret_steal<py::object>(out);
  Py_ssize_t at = 0;
  for (const auto& groups : firsts) {
    PyObject* item = nullptr;
    for (const int g : groups) {
      const int64_t a = spans[2 * static_cast<size_t>(g)], b = spans[2 * static_cast<size_t>(g) + 1];
      if (a >= 0 && b > a) {
        item = span(a, b);
        break;
      }
    }
    if (item == nullptr) {
      item = Py_None;
      Py_INCREF(item);
    }
    PyTuple_SET_ITEM(out, at++, item);
  }
  for (const int g : starts) PyTuple_SET_ITEM(out, at++, PyLong_FromLongLong(spans[2 * static_cast<size_t>(g)]));
  return result;
}

void check(const HeaderMatcher& matcher, const std::vector<int>& groups) {
  for (const int g : groups) {
    if (g < 0 || static_cast<uint32_t>(g) > matcher.groups()) {
      throw std::invalid_argument("HeaderMatcher.read: no group " + std::to_string(g));
    }
  }
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
          [](HeaderMatcher& self, const py::list& lines, const std::vector<std::vector<int>>& firsts,
             const std::vector<int>& starts) {
            for (const auto& groups : firsts) check(self, groups);
            check(self, starts);
            std::vector<int64_t> spans;
            py::list out(lines.size());
            Py_ssize_t i = 0;
            for (const py::handle line : lines) {
              PyList_SET_ITEM(out.ptr(), i++, read_one(self, line.ptr(), firsts, starts, spans).release().ptr());
            }
            return out;
          },
          py::arg("lines"), py::arg("firsts"), py::arg("starts"),
          "Per line: a tuple of, per group list of `firsts`, the (start, end) of its first group that matched "
          "text, else None, then per group of `starts` its start (-1: unset); None where the line is not ASCII or "
          "the match stopped short (a PCRE2 limit): the caller reads that line with Python's re.");
}

}  // namespace ribbon
