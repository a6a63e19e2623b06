#include "version.hpp"

namespace ribbon {

const char* core_version() noexcept { return "0.1.0"; }

}  // namespace ribbon
