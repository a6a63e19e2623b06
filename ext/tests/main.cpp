// The C++ unit-test driver of the core. Exit code 0 iff every check passed.
// `ribbon_core_tests NAME...` runs only the named cases.
#include <cstring>

#include "check.hpp"

namespace ribbon_test {
std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}
int& failures() {
  static int n = 0;
  return n;
}
}  // namespace ribbon_test

int main(int argc, char** argv) {
  int ran = 0;
  for (const auto& c : ribbon_test::registry()) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted = wanted || std::strcmp(argv[i], c.name) == 0;
    if (!wanted) continue;
    const int before = ribbon_test::failures();
    c.fn();
    ++ran;
    std::printf("%s %s\n", ribbon_test::failures() == before ? "ok  " : "FAIL", c.name);
  }
  std::printf("%d cases, %d failed checks\n", ran, ribbon_test::failures());
  return ran > 0 && ribbon_test::failures() == 0 ? 0 : 1;
}
