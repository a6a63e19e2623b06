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
  py::list top;
  for (const auto& [value, count] : v.top) top.append(py::make_tuple(text(value), count));
  return py::make_tuple(text(v.key), var_kind_name(v.kind), v.occurrences, v.distinct, v.distinct_capped,
                        v.numeric, v.min, v.median, v.max, top);
}

py::dict to_python(const Analysis& a) {
  py::list templates;
  for (const LineTemplate& t : a.templates) {
    py::list vars;
    for (const VarSummary& v : t.vars) vars.append(summary(v));
    templates.append(py::make_tuple(text(t.pattern), t.count, t.first_line, t.last_line, t.var_base, vars));
  }
  py::dict d;
  d["line_template"] = to_array(a.line_template);  // int32 [L]
  d["line_severity"] = to_array(a.line_severity);  // float32 [L]
  d["num_values"] = to_array(a.num_values);        // float64 [T]
  d["num_lines"] = to_array(a.num_lines);          // int32 [T]
  d["num_vars"] = to_array(a.num_vars);            // int32 [T]
  d["templates"] = templates;
  d["raw_templates"] = a.raw_templates;
  return d;
}

}  // namespace

void register_templater(py::module_& m) {
  m.def(
      "analyze_templates",
      [](const py::bytes& data, const std::vector<std::string>& protected_words,
         const std::vector<std::pair<std::string, double>>& severity, uint32_t top_values, bool merge,
         uint32_t min_merge_tokens) {
        TemplaterConfig c;
        c.protected_words = protected_words;
        c.severity = severity;
        c.top_values = top_values;
        c.merge = merge;
        c.min_merge_tokens = min_merge_tokens;
        std::string_view view = data;  // the bytes object stays alive (and immutable) for the call
        Analysis a;
        {
          py::gil_scoped_release nogil;
          a = analyze_templates(view, c);
        }
        return to_python(a);
      },
      py::arg("text"), py::kw_only(), py::arg("protected_words"), py::arg("severity"), py::arg("top_values") = 5,
      py::arg("merge") = true, py::arg("min_merge_tokens") = 3,
      "Line templates of a document (UTF-8, lines separated by newlines); see ext/core/templater.hpp.");
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
