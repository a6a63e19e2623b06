// Bindings of the header parse cache's key (ext/core/shape_key.hpp): str in, str out.
#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "register.hpp"
#include "shape_key.hpp"

namespace py = pybind11;

namespace ribbon {

void register_shape(py::module_& m) {
  m.def(
      "shape_key",
      [](const py::str& text) {
        Py_ssize_t size = 0;
        const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);  // raises on a lone surrogate
        if (data == nullptr) throw py::error_already_set();
        const std::string key = shape_key(std::string_view(data, static_cast<size_t>(size)));
        PyObject* o = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "strict");
        if (o == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::str>(o);
      },
      py::arg("text"),
      "`text` with its digits written 0 and its hex ids in one form per length and leading digits "
      "(worker/digest/header_rows.py).");
}

}  // namespace ribbon
