#pragma once
// One register_* function per area; module.cpp calls them.
#include <pybind11/pybind11.h>

namespace ribbon {
void register_packer(pybind11::module_& m);
void register_window(pybind11::module_& m);
void register_templater(pybind11::module_& m);
void register_shape(pybind11::module_& m);
void register_header(pybind11::module_& m);
}  // namespace ribbon
