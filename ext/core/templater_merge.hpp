#pragma once
// Internal to the templater: raw templates (equal masked lines) and their Drain-style merging
// (templater_merge.cpp). Not part of the public API.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "templater.hpp"

namespace ribbon {

// One raw template: equal masked lines. seps has n + 1 entries around n tokens.
struct Raw {
  std::vector<std::string> seps;
  std::vector<std::string> toks;   // constant text; empty for a variable
  std::vector<VarKind> kinds;      // per position
  std::vector<uint8_t> is_var;     // per position
  std::vector<int32_t> var_index;  // per position: index among the line's variable spans, or -1
  uint64_t count = 0;
  uint32_t first = 0, last = 0;
};

// Drain-style merging: raw templates that differ in one unprotected position join, round after
// round, while a template keeps at most a third of its positions merged. Returns each raw's root.
std::vector<uint32_t> merge_raws(const std::vector<Raw>& raws, const TemplaterConfig& cfg,
                                 const std::unordered_set<uint64_t>& protect);

}  // namespace ribbon
