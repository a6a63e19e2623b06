#include "shape_key.hpp"

#include <cstddef>

namespace ribbon {
namespace {

inline bool digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool hex_letter(unsigned char c) { return c >= 'a' && c <= 'f'; }
inline bool word(unsigned char c) {
  return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

// The end of the run of [0-9a-f] starting at `i`; sets whether it holds a digit and a letter.
size_t hex_run(std::string_view s, size_t i, bool& digits, bool& letters) {
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (digit(c)) {
      digits = true;
    } else if (hex_letter(c)) {
      letters = true;
    } else {
      break;
    }
  }
  return i;
}

// The end of a uuid starting at `i` (8-4-4-4-12 hex runs joined by '-', a letter among them), or `i` where none
// starts there.
size_t uuid_end(std::string_view s, size_t i) {
  bool d = false, l = false;
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t at = i;
  for (size_t g = 0; g < 5; ++g) {
    if (g > 0) {
      if (at >= s.size() || s[at] != '-') return i;
      ++at;
    }
    const size_t end = hex_run(s, at, d, l);
    if (end - at != kGroups[g]) return i;
    at = end;
  }
  return l ? at : i;
}

}  // namespace

std::string shape_key(std::string_view text) {
  std::string out(text);
  const size_t n = out.size();
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(out[i]);
    const bool starts = (digit(c) || hex_letter(c)) && (i == 0 || !word(static_cast<unsigned char>(out[i - 1])));
    if (!starts) {
      if (digit(c)) out[i] = '0';
      ++i;
      continue;
    }
    bool d = false, l = false;
    size_t end = uuid_end(out, i);
    bool fold = end > i;
    if (!fold) end = hex_run(out, i, d, l);
    fold = fold || (d && l && end - i >= 8);
    if (end < n && word(static_cast<unsigned char>(out[end]))) fold = false;  // a longer word: no id
    if (!fold) {
      for (; i < end; ++i) {
        if (digit(static_cast<unsigned char>(out[i]))) out[i] = '0';
      }
      continue;
    }
    // an id: its leading digits as 0, every other hex character a, the last one 0 where none leads (it holds a digit)
    size_t lead = i;
    while (lead < end && digit(static_cast<unsigned char>(out[lead]))) out[lead++] = '0';
    for (size_t k = lead; k < end; ++k) {
      if (out[k] != '-') out[k] = 'a';
    }
    if (lead == i) out[end - 1] = '0';
    i = end;
  }
  return out;
}

}  // namespace ribbon
