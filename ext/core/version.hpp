#pragma once

namespace ribbon {

// Version of the C++ core; the Python package checks it matches its own.
const char* core_version() noexcept;

}  // namespace ribbon
