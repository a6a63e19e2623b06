#include "shape_key.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace ribbon {
namespace {

constexpr uint8_t kWord = 1, kDigit = 2, kHexLetter = 4, kOther = 8;  // a word byte: [0-9A-Za-z_] or >= 0x80

constexpr std::array<uint8_t, 256> classes() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool digit = c >= '0' && c <= '9';
    t[static_cast<size_t>(c)] = static_cast<uint8_t>((alpha || digit || c == '_' || c >= 0x80 ? kWord : 0) |
                                                     (digit ? kDigit : 0) | (c >= 'a' && c <= 'f' ? kHexLetter : 0));
    if ((t[static_cast<size_t>(c)] & (kWord | kDigit | kHexLetter)) == kWord) t[static_cast<size_t>(c)] |= kOther;
  }
  return t;
}
constexpr std::array<uint8_t, 256> kClass = classes();

constexpr std::array<char, 256> zeros() {  // every byte itself, an ASCII digit '0'
  std::array<char, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = c >= '0' && c <= '9' ? '0' : static_cast<char>(c);
  return t;
}
constexpr std::array<char, 256> kZero = zeros();

inline uint8_t cls(const std::string& s, size_t i) { return kClass[static_cast<unsigned char>(s[i])]; }

// The end of a uuid whose first group is the word [i, i + 8) (8-4-4-4-12 hex words joined by '-', the last
// followed by no word byte), or `i` where none is; `letter` is set where a group other than the first holds one.
size_t uuid_end(const std::string& s, size_t i, bool& letter) {
  static constexpr size_t kGroups[] = {4, 4, 4, 12};
  size_t at = i + 8;
  for (size_t g : kGroups) {
    if (at >= s.size() || s[at] != '-') return i;
    ++at;
    for (size_t k = 0; k < g; ++k, ++at) {
      if (at >= s.size()) return i;
      const uint8_t c = cls(s, at);
      if (!(c & (kDigit | kHexLetter))) return i;
      letter = letter || (c & kHexLetter);
    }
  }
  return at < s.size() && (cls(s, at) & kWord) ? i : at;
}

// An id [i, end) (digits already written 0): its leading digits stay 0, every other hex character becomes a,
// and where no digit leads, its last character becomes 0.
void fold_id(std::string& s, size_t i, size_t end) {
  size_t lead = i;
  while (lead < end && s[lead] == '0') ++lead;
  for (size_t k = lead; k < end; ++k) {
    if (s[k] != '-') s[k] = 'a';
  }
  if (lead == i) s[end - 1] = '0';
}

}  // namespace

std::string shape_key(std::string_view text) {
  std::string out(text);
  const size_t n = out.size();
  size_t i = 0;
  while (i < n) {
    if (!(cls(out, i) & kWord)) {
      ++i;
      continue;
    }
    // a word [i, j): its digits written 0 on the way; an id where it is hex alone
    size_t j = i;
    uint8_t seen = 0;
    for (; j < n; ++j) {
      const auto b = static_cast<unsigned char>(out[j]);
      const uint8_t c = kClass[b];
      if (!(c & kWord)) break;
      out[j] = kZero[b];
      seen = static_cast<uint8_t>(seen | c);
    }
    const bool hex = !(seen & kOther), digits = seen & kDigit, letters = seen & kHexLetter;
    if (hex && j - i == 8) {
      bool letter = letters;
      const size_t end = uuid_end(out, i, letter);
      if (end > i && letter) {
        for (size_t k = j; k < end; ++k) {
          if (cls(out, k) & kDigit) out[k] = '0';
        }
        fold_id(out, i, end);
        i = end;
        continue;
      }
    }
    if (hex && digits && letters && j - i >= 8) fold_id(out, i, j);
    i = j;
  }
  return out;
}

}  // namespace ribbon
