// How a token reads: constant or which kind of variable; the words that classify it (names, calendar
// and unit words); numbers, severity words and clock candidates of a line. Internal to the templater
// (templater_tokens.cpp cuts the lines); the public API is templater.hpp.
#include "templater_tokens.hpp"

#include <algorithm>
#include <iterator>

namespace ribbon {
namespace {

// A name with a digit or two inside (jk2_init(), mod_jk2, log4j, utf8_decode): letters, '_' and runs of at most
// two digits, starting with a letter, with a letter that cannot be hex or a '_' (so "ab12cd" stays an id).
bool digit_name(std::string_view t) {
  if (t.size() >= 2 && t.substr(t.size() - 2) == "()") t.remove_suffix(2);
  if (t.empty() || !is_alpha(t[0])) return false;
  size_t run = 0, letters = 0;
  bool plain = false;
  for (char c : t) {
    if (is_digit(c)) {
      if (++run > 2) return false;
      continue;
    }
    run = 0;
    if (!is_alpha(c) && c != '_') return false;
    ++letters;
    if (!is_hex(c)) plain = true;
  }
  return plain && letters >= 3;
}

bool uuid_like(std::string_view t) {
  if (t.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? t[i] != '-' : !is_hex(t[i])) return false;
  }
  return true;
}

bool iequals(std::string_view t, std::string_view lower_word) {  // t equals the lowercase word, ignoring case
  if (t.size() != lower_word.size()) return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (lower(t[i]) != lower_word[i]) return false;
  return true;
}

// A month or weekday name, as dates write them (Jul, Sun, July, Sunday): part of a time.
bool calendar_word(std::string_view t) {
  static const char* const kNames[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun"};
  static const char* const kLong[] = {"january", "february", "march", "april", "june", "july", "august",
                                      "september", "october", "november", "december", "monday", "tuesday",
                                      "wednesday", "thursday", "friday", "saturday", "sunday"};
  if (t.size() < 3 || t.size() > 9 || !(t[0] >= 'A' && t[0] <= 'Z')) return false;
  auto is = [&](const char* w) { return iequals(t, w); };
  if (t.size() == 3) return std::any_of(std::begin(kNames), std::end(kNames), is);
  return std::any_of(std::begin(kLong), std::end(kLong), is);
}

}  // namespace

bool short_name(std::string_view t) {  // S1, T300, eth0, bond0:, frame_3, ipv4: letters then 1-3 digits
  if (!t.empty() && t.back() == ':') t.remove_suffix(1);
  size_t i = 0;
  while (i < t.size() && (is_alpha(t[i]) || t[i] == '_')) ++i;
  if (i == 0 || !is_alpha(t[0])) return false;
  const size_t d0 = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  if (i == d0 || i - d0 > 3) return false;
  while (i < t.size() && is_alpha(t[i])) ++i;
  return i == t.size();
}

// A unit of size, duration or rate written as a word after its number ("12 KB", "3 sec", "1024 bytes").
bool unit_word(std::string_view t) {
  static const char* const kUnits[] = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "byte", "bytes",
                                       "ns", "us", "ms", "s", "sec", "secs", "second", "seconds", "min", "mins",
                                       "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "kbps", "mbps",
                                       "gbps", "hz", "khz", "mhz", "ghz"};
  if (t.empty() || t.size() > 7) return false;
  return std::any_of(std::begin(kUnits), std::end(kUnits), [&](const char* u) { return iequals(t, u); });
}

// The token's letters core: lowercase, punctuation stripped at both ends ("down:" -> "down").
uint64_t core_code(std::string_view t) {
  size_t a = 0, b = t.size();
  while (a < b && !is_alpha(t[a]) && !is_digit(t[a])) ++a;
  while (b > a && !is_alpha(t[b - 1]) && !is_digit(t[b - 1])) --b;
  return word_code(t.substr(a, b - a));
}


const char* placeholder(VarKind k) {
  switch (k) {
    case VarKind::kNumber: return "<n>";
    case VarKind::kHex: return "<hex>";
    case VarKind::kIp: return "<ip>";
    case VarKind::kUuid: return "<uuid>";
    case VarKind::kTime: return "<ts>";
    case VarKind::kQuoted: return "<q>";
    default: return "<*>";
  }
}

bool clock_candidate(std::string_view line) {
  auto digits = [&](size_t from, size_t n) {
    if (from + n > line.size()) return false;
    for (size_t i = from; i < from + n; ++i)
      if (!is_digit(line[i])) return false;
    return true;
  };
  if (digits(!line.empty() && line[0] == '[' ? 1 : 0, 10)) return true;
  if (digits(0, 6) && line.size() > 6 && line[6] == ' ' && digits(7, 6)) return true;
  size_t head = 0;  // the bytes of the first 104 code points (Python slices characters)
  for (size_t chars = 0; head < line.size() && chars < 104; ++chars) {
    ++head;
    while (head < line.size() && (static_cast<unsigned char>(line[head]) & 0xC0) == 0x80) ++head;
  }
  for (size_t i = 0; i + 7 <= head; ++i)  // d:dd:dd
    if (line[i + 1] == ':' && line[i + 4] == ':' && is_digit(line[i]) && is_digit(line[i + 2]) &&
        is_digit(line[i + 3]) && is_digit(line[i + 5]) && is_digit(line[i + 6]))
      return true;
  return false;
}

float line_severity(std::string_view line, const std::unordered_map<uint64_t, double>& sev) {
  double best = 0.0;
  size_t i = 0;
  while (i < line.size()) {
    if (!is_alpha(line[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < line.size() && is_alpha(line[j])) ++j;
    if (j - i >= 2 && j - i <= 12) {
      auto it = sev.find(word_code(line.substr(i, j - i)));
      if (it != sev.end()) best = std::max(best, it->second);
    }
    i = j;
  }
  return static_cast<float>(best);
}

const char* var_kind_name(VarKind k) {
  switch (k) {
    case VarKind::kNumber: return "number";
    case VarKind::kHex: return "hex";
    case VarKind::kIp: return "ip";
    case VarKind::kUuid: return "uuid";
    case VarKind::kTime: return "time";
    case VarKind::kQuoted: return "quoted";
    case VarKind::kMerged: return "merged";
    default: return "other";
  }
}

bool parse_number(std::string_view t, double& out) {
  size_t i = 0;
  const bool neg = !t.empty() && (t[0] == '-' || t[0] == '+' || t[0] == '<' || t[0] == '>');
  if (neg) ++i;
  if (i >= t.size() || !is_digit(t[i])) return false;
  double v = 0.0;
  size_t digits = 0;
  for (; i < t.size() && is_digit(t[i]); ++i, ++digits) v = v * 10.0 + (t[i] - '0');
  if (i + 1 < t.size() && t[i] == '.' && is_digit(t[i + 1])) {
    double scale = 0.1;
    for (++i; i < t.size() && is_digit(t[i]); ++i, scale *= 0.1) v += (t[i] - '0') * scale;
  }
  if (digits > 18) return false;  // an id, not a magnitude
  out = t[0] == '-' ? -v : v;
  return true;
}

bool classify_token(std::string_view t, VarKind& kind) {
  if (t.size() >= 2 && t.front() == '"') {
    kind = VarKind::kQuoted;
    return true;
  }
  const size_t slash = t.size() >= 3 ? t.find('/') : std::string_view::npos;
  if (slash != std::string_view::npos && t.find('/', slash + 1) != std::string_view::npos &&
      (slash == 0 || (slash >= 2 && t[slash - 1] == ':' && t[slash + 1] == '/'))) {  // a path or URL: /a/b, http://h
    kind = VarKind::kOther;
    return true;
  }
  if (std::none_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (t.size() >= 8 && std::all_of(t.begin(), t.end(), is_hex)) {  // ffffffff: a hex value without a digit
      kind = VarKind::kHex;
      return true;
    }
    if (!calendar_word(t)) return false;
    kind = VarKind::kTime;
    return true;
  }
  size_t digits = 0, dots = 0, colons = 0, dashes = 0, slashes = 0, hexletters = 0;
  bool all_hex = true;
  for (char c : t) {
    if (is_digit(c)) ++digits;
    else if (c == '.') ++dots;
    else if (c == ':') ++colons;
    else if (c == '-') ++dashes;
    else if (c == '/') ++slashes;
    else if (is_hex(c)) ++hexletters;
    if (!is_hex(c)) all_hex = false;
  }
  if (digits == 0) return false;
  kind = VarKind::kOther;
  if (uuid_like(t)) {
    kind = VarKind::kUuid;
  } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') && is_hex(t[2])) {
    kind = VarKind::kHex;
  } else if (is_digit(t[0]) && dots == 3 && digits + dots + colons + slashes == t.size()) {
    kind = VarKind::kIp;
  } else if (is_digit(t[0]) && (colons >= 1 || (dashes == 2 && t.size() >= 8) || slashes == 2) &&
             std::all_of(t.begin(), t.end(), [](char c) {
               return is_digit(c) || c == ':' || c == '.' || c == '-' || c == '/' || c == 'T' || c == 'Z' ||
                      c == '+' || c == ',';
             })) {
    kind = VarKind::kTime;
  } else if (all_hex && t.size() >= 6 && hexletters > 0) {
    kind = VarKind::kHex;
  } else {
    double v = 0.0;
    size_t i = (t[0] == '-' || t[0] == '+' || t[0] == '<' || t[0] == '>') ? 1 : 0;
    while (i < t.size() && (is_digit(t[i]) || t[i] == '.')) ++i;
    size_t unit = 0;
    while (i + unit < t.size() && (is_alpha(t[i + unit]) || t[i + unit] == '%' || t[i + unit] == '/')) ++unit;
    if (i + unit == t.size() && unit <= 6 && dots <= 1 && parse_number(t, v)) kind = VarKind::kNumber;
    else if (short_name(t) || digit_name(t)) return false;
  }
  return true;
}

}  // namespace ribbon
