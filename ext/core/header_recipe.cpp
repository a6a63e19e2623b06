#include "header_recipe.hpp"

#include <stdexcept>
#include <utility>

namespace ribbon {

namespace {

constexpr MatchOptions kSearch{false, false}, kMatch{true, false};

// Python's str.isspace on an ASCII character (what str.split and str.strip cut at).
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string_view slice(std::string_view key, int64_t a, int64_t b) {
  const auto n = static_cast<int64_t>(key.size());
  const int64_t end = b < 0 || b > n ? n : b;
  return a < end ? key.substr(static_cast<size_t>(a), static_cast<size_t>(end - a)) : std::string_view();
}

int words(std::string_view text) {      // len(text.split())
  int n = 0;
  bool in_word = false;
  for (const char c : text) {
    if (!is_space(c) && !in_word) ++n;
    in_word = !is_space(c);
  }
  return n;
}

bool blank(std::string_view key, const std::vector<Piece>& pieces) {   // not "".join(pieces).strip()
  for (const Piece& p : pieces) {
    for (const char c : slice(key, p.a, p.b)) {
      if (!is_space(c)) return false;
    }
  }
  return true;
}

HeaderShape shape_of(std::string_view key, const Recipe& r, const std::array<bool, 10>& set) {
  if (set[5]) return HeaderShape::rfc5424;
  const bool ts = set[0], host = set[1], prog = set[2], pri = set[6];
  if ((prog && (pri || host)) || set[7] || set[8]) return HeaderShape::rfc3164;
  if (ts) {
    const std::string_view s = slice(key, r.ts.a, r.ts.b);
    return s.size() >= 7 && s[2] == '/' && s[6] == '/' && s[s.size() - 6] == ' ' ? HeaderShape::access
                                                                                 : HeaderShape::timestamped;
  }
  return pri ? HeaderShape::rfc3164 : HeaderShape::level_first;
}

}  // namespace

RecipeReader::RecipeReader(const RecipePatterns& patterns, RecipeGroups groups)
    : header_(patterns.header),
      trailer_(patterns.trailer, kSearch),
      status_access_(patterns.status_access, kMatch),
      status_request_(patterns.status_request, kMatch),
      request_(patterns.request, kSearch),
      continuation_(patterns.continuation, kMatch),
      groups_(std::move(groups)) {
  const auto check = [this](int g) {
    if (g < 0 || static_cast<uint32_t>(g) > header_.groups()) {
      throw std::invalid_argument("RecipeReader: no group " + std::to_string(g));
    }
  };
  for (const auto& list : groups_.firsts) {
    for (const int g : list) check(g);
  }
  check(groups_.msg);
  check(groups_.fields);
  if (status_access_.groups() < 1 || status_request_.groups() < 1) {
    throw std::invalid_argument("RecipeReader: a status pattern without the status code's group");
  }
}

int RecipeReader::read(std::string_view key, Recipe& out) {
  int rc = header_.match(key, spans_);
  if (rc != 1) return rc;
  std::array<Span, 10> s{};
  std::array<bool, 10> set{};
  for (size_t k = 0; k < s.size(); ++k) {
    for (const int g : groups_.firsts[k]) {
      const int64_t a = spans_[2 * static_cast<size_t>(g)], b = spans_[2 * static_cast<size_t>(g) + 1];
      if (a >= 0 && b > a) {
        s[k] = {a, b};
        set[k] = true;
        break;
      }
    }
  }
  const int64_t at = spans_[2 * static_cast<size_t>(groups_.msg)];
  const int64_t fields_at = spans_[2 * static_cast<size_t>(groups_.fields)];
  if (at < 0) return 0;
  for (size_t k = 0; k < 5; ++k) {     // ts, host, program, pid, token: `-` is none
    if (set[k] && s[k].b - s[k].a == 1 && key[static_cast<size_t>(s[k].a)] == '-') set[k] = false;
    if (!set[k]) s[k] = {};
  }
  out.ts = s[0], out.host = s[1], out.prog = s[2], out.pid = s[3], out.tok = s[4];
  out.pri = set[6] ? s[6] : Span{};
  out.at = at, out.status = -1;
  out.pieces.clear();
  out.body.clear();
  out.has_body = false;
  if (set[0] || set[4] || set[6]) {
    out.matched = true;
    bool head = set[9] && words(slice(key, s[9].a, s[9].b)) > 1;   // one leading column is dropped
    int64_t end = -1;
    if (!key.empty() && key.back() == ')') {
      rc = trailer_.find(key, static_cast<size_t>(at), 0, end);
      if (rc < 0) return rc;
      if (rc == 0) end = -1;
    }
    if (head) out.pieces.push_back({s[9].a, s[9].b});
    out.pieces.push_back({at, end});
    if (end >= 0 || (-1 < fields_at && fields_at < at)) {
      out.has_body = true;
      if (head) out.body.push_back({s[9].a, s[9].b});
      out.body.push_back({fields_at, -1});
    }
    if (!out.has_body && blank(key, out.pieces)) {   // a header and nothing after it: the line is its message
      head = false;
      out.pieces.assign(1, Piece{0, -1});
    }
    out.has = (set[1] ? kHasHost : 0) | (set[6] ? kHasPri : 0) | (head || end >= 0 ? kHasPieces : 0) |
              (out.has_body ? kHasBody : 0);
    out.shape = shape_of(key, out, set);
  } else {
    out.matched = false;
    out.shape = HeaderShape::none;
    out.has = 0;
    out.pieces.assign(1, Piece{0, -1});
    out.host = out.prog = out.pid = Span{};
  }
  out.continues = false;
  if (!set[0]) {
    int64_t ignored = 0;
    rc = continuation_.find(key, 0, 0, ignored);
    if (rc < 0) return rc;
    out.continues = rc == 1;
  }
  return 1;
}

int RecipeReader::read_status(std::string_view key, Recipe& out) {
  const bool access = out.shape == HeaderShape::access;
  if (out.ts.b == 0 ||
      !(access || key.find(" /") != std::string_view::npos || key.find("\"/") != std::string_view::npos)) {
    return 1;
  }
  const auto at = static_cast<size_t>(out.at);
  int64_t status = -1;
  int rc = 0;
  if (access) {
    const size_t quote = key.find('"', at);
    if (quote != std::string_view::npos) rc = status_access_.find(key, quote, 1, status);
  } else {
    int64_t request = -1;
    rc = request_.find(key, at, 0, request);
    if (rc == 1) rc = status_request_.find(key, static_cast<size_t>(request), 1, status);
  }
  if (rc < 0) return rc;
  if (rc == 1 && status >= 0) {
    out.status = status;
    out.has |= kHasStatus;
  }
  return 1;
}

}  // namespace ribbon
