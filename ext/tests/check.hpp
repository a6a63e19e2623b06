#pragma once
// A tiny test harness: CHECK records a failure and goes on; TEST registers.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace ribbon_test {

struct Case {
  const char* name;
  std::function<void()> fn;
};
std::vector<Case>& registry();
int& failures();

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

}  // namespace ribbon_test

#define RIBBON_CAT2(a, b) a##b
#define RIBBON_CAT(a, b) RIBBON_CAT2(a, b)
#define TEST(name)                                                                 \
  static void name();                                                              \
  static const ribbon_test::Register RIBBON_CAT(reg_, name)(#name, name);          \
  static void name()
#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ribbon_test::failures()++;                                                   \
    }                                                                              \
  } while (0)
#define CHECK_THROWS(expr, type)                                                   \
  do {                                                                             \
    bool thrown_ = false;                                                          \
    try {                                                                          \
      expr;                                                                        \
    } catch (const type&) {                                                        \
      thrown_ = true;                                                              \
    }                                                                              \
    CHECK(thrown_ && #expr " throws " #type);                                      \
  } while (0)
