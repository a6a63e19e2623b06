// Bindings of the line templater: bytes in, numpy arrays and plain tuples out.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <stdexcept>
#include <string>
#include <type_traits>
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

// The tuple types of a result's templates and variables: a subclass of tuple each (the facade's NamedTuples),
// or None for plain tuples.
struct TupleTypes {
  PyTypeObject* template_type = nullptr;
  PyTypeObject* var_type = nullptr;
};

PyTypeObject* tuple_type(const py::object& type, const char* name) {
  if (type.is_none()) return nullptr;
  if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()), &PyTuple_Type))
    throw std::invalid_argument(std::string(name) + " must be a subclass of tuple or None, got " +
                                std::string(py::str(py::repr(type))));
  return reinterpret_cast<PyTypeObject*>(type.ptr());
}

template <typename T>
py::object to_object(T&& v) {
  if constexpr (std::is_base_of_v<py::handle, std::decay_t<T>>) {
    return py::reinterpret_borrow<py::object>(v);
  } else {
    return py::cast(std::forward<T>(v));
  }
}

// A tuple of `fields`, an instance of `type` where given (made as tuple.__new__(type, fields) makes one: the
// instance allocated by the type and its items set, here without the plain tuple between).
template <typename... Fields>
py::object make(PyTypeObject* type, Fields&&... fields) {
  if (type == nullptr) return py::make_tuple(std::forward<Fields>(fields)...);
  constexpr size_t n = sizeof...(Fields);
  std::array<py::object, n> items{to_object(std::forward<Fields>(fields))...};  // every cast before the allocation
  PyObject* o = type->tp_alloc(type, static_cast<py::ssize_t>(n));
  if (o == nullptr) throw py::error_already_set();
  for (size_t i = 0; i < n; ++i) PyTuple_SET_ITEM(o, static_cast<py::ssize_t>(i), items[i].release().ptr());
  return py::reinterpret_steal<py::object>(o);
}

py::object summary(const VarSummary& v, PyTypeObject* type) {
  py::tuple top(v.top.size());
  for (size_t i = 0; i < v.top.size(); ++i) top[i] = py::make_tuple(text(v.top[i].first), v.top[i].second);
  return make(type, text(v.key), var_kind_name(v.kind), v.occurrences, v.distinct, v.distinct_capped, v.numeric,
              v.min, v.median, v.max, top);
}

// (line_template, line_severity, line_clock, num_values, num_lines, num_vars, num_z, line_z, template_severity,
//  templates, raw_templates); a template is (index, pattern, count, first, last, var_base, vars), of
//  types.template_type where given, each variable of types.var_type.
py::tuple to_python(const Analysis& a, const TupleTypes& types) {
  py::tuple templates(a.templates.size());
  for (size_t i = 0; i < a.templates.size(); ++i) {
    const LineTemplate& t = a.templates[i];
    py::tuple vars(t.vars.size());
    for (size_t v = 0; v < t.vars.size(); ++v) vars[v] = summary(t.vars[v], types.var_type);
    templates[i] = make(types.template_type, i, text(t.pattern), t.count, t.first_line, t.last_line, t.var_base, vars);
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
          [](const Templater& self, const py::bytes& data, const py::object& template_type,
             const py::object& var_type) {
            const TupleTypes types{tuple_type(template_type, "template_type"), tuple_type(var_type, "var_type")};
            std::string_view view = data;  // the bytes object stays alive (and immutable) for the call
            Analysis a;
            {
              py::gil_scoped_release nogil;
              a = self.analyze(view);
            }
            return to_python(a, types);
          },
          py::arg("text"), py::kw_only(), py::arg("template_type") = py::none(), py::arg("var_type") = py::none(),
          "One document's pass: a tuple of arrays and templates (see register_templater.cpp); each template an "
          "instance of template_type, each variable of var_type, where given (subclasses of tuple: NamedTuples).");
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
