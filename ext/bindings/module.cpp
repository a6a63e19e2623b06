// Registers the bindings of the C++ core as the private module worker._core.
// One register_*.cpp per area; this file only wires them together.
#include <pybind11/pybind11.h>

#include "register.hpp"
#include "version.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "Ribbon's C++ core (private; use worker.packer).";
  m.attr("__version__") = ribbon::core_version();
  ribbon::register_packer(m);
  ribbon::register_window(m);
  ribbon::register_templater(m);
  ribbon::register_shape(m);
  ribbon::register_header(m);
}
