// Bindings of the line templater: bytes in, numpy arrays and plain tuples out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "register.hpp"
#include "templater.hpp"

namespace py = pybind11;

namespace ribbon {
namespace {

template <typename T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));  // [n]
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

py::str text(const std::string& s) {  // spans are cut at ASCII delimiters; bad bytes become U+FFFD
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::tuple summary(const VarSummary& v) {
  py::tuple top(v.top.size());
  for (size_t i = 0; i < v.top.size(); ++i) top[i] = py::make_tuple(text(v.top[i].first), v.top[i].second);
  return py::make_tuple(text(v.key), var_kind_name(v.kind), v.occurrences, v.distinct, v.distinct_capped,
                        v.numeric, v.min, v.median, v.max, top);
}

// (line_template, line_severity, line_clock, num_values, num_lines, num_vars, num_z, line_z, template_severity,
//  templates, raw_templates); a template is (index, pattern, count, first, last, var_base, vars).
py::tuple to_python(const Analysis& a) {
  py::tuple templates(a.templates.size());
  for (size_t i = 0; i < a.templates.size(); ++i) {
    const LineTemplate& t = a.templates[i];
    py::tuple vars(t.vars.size());
    for (size_t v = 0; v < t.vars.size(); ++v) vars[v] = summary(t.vars[v]);
    templates[i] = py::make_tuple(i, text(t.pattern), t.count, t.first_line, t.last_line, t.var_base, vars);
  }
  return py::make_tuple(to_array(a.line_template), to_array(a.line_severity), to_array(a.line_clock),
                        to_array(a.num_values),
                        to_array(a.num_lines), to_array(a.num_vars), to_array(a.num_z), to_array(a.line_z),
                        to_array(a.template_severity), templates, a.raw_templates);
}

}  // namespace

void register_templater(py::module_& m) {
  py::class_<Templater>(m, "Templater",
                        "Line templates of documents (UTF-8, lines separated by newlines); see ext/core/templater.hpp. "
                        "The word tables are read once; analyze() may run on many threads at once.")
      .def(py::init([](const std::vector<std::string>& protected_words,
                       const std::vector<std::pair<std::string, double>>& severity, uint32_t top_values, bool merge,
                       uint32_t min_merge_tokens, uint32_t min_group, uint32_t word_family) {
             TemplaterConfig c;
             c.protected_words = protected_words;
             c.severity = severity;
             c.top_values = top_values;
             c.merge = merge;
             c.min_merge_tokens = min_merge_tokens;
             c.min_group = min_group;
             c.word_family = word_family;
             return Templater(std::move(c));
           }),
           py::kw_only(), py::arg("protected_words"), py::arg("severity"), py::arg("top_values") = 5,
           py::arg("merge") = true, py::arg("min_merge_tokens") = 2, py::arg("min_group") = 5,
           py::arg("word_family") = 3)
      .def(
          "analyze",
          [](const Templater& self, const py::bytes& data) {
            std::string_view view = data;  // the bytes object stays alive (and immutable) for the call
            Analysis a;
            {
              py::gil_scoped_release nogil;
              a = self.analyze(view);
            }
            return to_python(a);
          },
          py::arg("text"), "One document's pass: a tuple of arrays and templates (see register_templater.cpp).");
  m.def(
      "classify_token",
      [](const std::string& token) -> py::object {
        VarKind kind = VarKind::kOther;
        if (!classify_token(token, kind)) return py::none();
        return py::str(var_kind_name(kind));
      },
      py::arg("token"), "The kind of a variable token, or None for a constant.");
}

}  // namespace ribbon
