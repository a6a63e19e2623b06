#pragma once
// Internal to the templater: the token level (templater_tokens.cpp cuts lines into tokens,
// templater_classify.cpp says how each reads). Not part of the public API.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "templater.hpp"

namespace ribbon {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

inline uint64_t mix(uint64_t h, uint64_t v) {  // a 64-bit hash step (splitmix finalizer over the sum)
  uint64_t x = h * 0x9E3779B97F4A7C15ULL + v + 0x632BE59BD9B4E019ULL;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// A word of a-z as an integer, 5 bits a letter (<= 12 letters); 0 when it cannot be one.
inline uint64_t word_code(std::string_view w) {
  if (w.empty() || w.size() > 12) return 0;
  uint64_t code = 0;
  for (char c : w) {
    const char l = lower(c);
    if (l < 'a' || l > 'z') return 0;
    code = (code << 5) | static_cast<uint64_t>(l - 'a' + 1);
  }
  return code;
}

uint64_t core_code(std::string_view t);  // word_code of the token with punctuation stripped at both ends
bool short_name(std::string_view t);     // S1, T300, eth0, bond0:, frame_3, ipv4: letters then 1-3 digits
bool unit_word(std::string_view t);      // a unit of size, duration or rate written as a word ("KB", "sec")

struct Token {
  uint32_t start, len;  // byte offsets in the document
  bool var;
  VarKind kind;
};

const char* placeholder(VarKind k);  // <n> <hex> <ip> <uuid> <ts> <q> <*>

// Cuts a line into tokens and separators (seps: n + 1 around n tokens; a run of whitespace is one
// space; none before the first token or after the last). base: the line's offset in the document.
void tokenize(std::string_view line, size_t base, std::vector<Token>& toks, std::vector<std::string>& seps);

// The highest severity word of a line (words are runs of letters), 0 if none.
float line_severity(std::string_view line, const std::unordered_map<uint64_t, double>& sev);

}  // namespace ribbon
