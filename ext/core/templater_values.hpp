#pragma once
// Internal to the templater: the value summaries of a template's variables and the scores read
// from a finished pass (templater_values.cpp). Not part of the public API.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "templater.hpp"
#include "templater_tokens.hpp"

namespace ribbon {

// One variable's values: an open-addressing table of value hashes (distinct count, capped) whose
// first track_values entries also count their value (the commonest values come from those).
struct VarAcc {
  std::vector<uint64_t> keys;   // 0 = empty (a hash of 0 is stored as 1)
  std::vector<uint32_t> slot;   // entry index + 1, or 0 for a value seen but not tracked
  std::vector<std::pair<std::string_view, uint64_t>> entries;
  std::vector<double> nums;
  uint64_t occurrences = 0;
  size_t used = 0;
  bool capped = false;

  void add(std::string_view value, const TemplaterConfig& cfg) {
    ++occurrences;
    uint64_t h = hash_bytes(value);
    h = h == 0 ? 1 : h;
    if (keys.empty()) {
      keys.assign(16, 0);
      slot.assign(16, 0);
    }
    size_t mask = keys.size() - 1;
    size_t i = static_cast<size_t>(h) & mask;
    while (keys[i] != 0 && keys[i] != h) i = (i + 1) & mask;
    if (keys[i] == h) {
      if (slot[i] != 0) ++entries[slot[i] - 1].second;
      return;
    }
    if (used >= cfg.distinct_cap) {
      capped = true;
      return;
    }
    keys[i] = h;
    ++used;
    if (entries.size() < cfg.track_values) {
      entries.emplace_back(value, 1);
      slot[i] = static_cast<uint32_t>(entries.size());
    }
    if (2 * used > keys.size()) grow();
  }

 private:
  void grow() {
    std::vector<uint64_t> old_keys(keys.size() * 2, 0);
    std::vector<uint32_t> old_slot(slot.size() * 2, 0);
    old_keys.swap(keys);
    old_slot.swap(slot);
    const size_t mask = keys.size() - 1;
    for (size_t j = 0; j < old_keys.size(); ++j) {
      if (old_keys[j] == 0) continue;
      size_t i = static_cast<size_t>(old_keys[j]) & mask;
      while (keys[i] != 0) i = (i + 1) & mask;
      keys[i] = old_keys[j];
      slot[i] = old_slot[j];
    }
  }
};

// The summary of one variable from its accumulated values (min, max, median, commonest values).
void finish_summary(VarAcc& acc, const TemplaterConfig& cfg, VarSummary& out);

// The unit word every value of a quantity ends with ("70 seconds", "5 seconds" -> "seconds"), when all its
// distinct values were tracked and there are two or more; else "".
std::string common_unit(const VarAcc& a);

// The scores read from the finished pass: each number's z, each line's largest, each template's severity.
void score(Analysis& out, uint32_t min_group);

}  // namespace ribbon
