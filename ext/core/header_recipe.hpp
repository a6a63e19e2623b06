#pragma once
// A line shape's recipe (worker/digest/header_rows.py: recipe(), the reference) read in one pass over its key:
// the header grammar's match (PCRE2's JIT), then what the recipe derives from it: the fields' spans (`-` none),
// the message's pieces (a multi-word leading column kept, the log4j trailer taken off), the body the templater
// reads, the header's shape, the `has` bits, the multiline rule and an access log's status. The patterns are
// worker/digest/header_jit.py's PATTERNS (Python's, spelt for PCRE2); the level of the token is the caller's
// (Python's level table), so the status, which depends on it, is read by a second call.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "header_match.hpp"

namespace ribbon {

struct Span {
  int64_t a = 0, b = 0;   // (0, 0): none
};
struct Piece {
  int64_t a = 0, b = -1;  // b -1: to the line's end
};

enum class HeaderShape : uint8_t { none, rfc5424, rfc3164, access, timestamped, level_first };

// header_rows.py's _HAS_* bits
constexpr int kHasHost = 1, kHasStatus = 2, kHasPri = 4, kHasPieces = 8, kHasBody = 16;

// The patterns in PCRE2's syntax: the grammar (anchored, multi-line), the trailer and the request (searched),
// the two status patterns and the multiline rule (anchored).
struct RecipePatterns {
  std::string header, trailer, status_access, status_request, request, continuation;
};

// The grammar's groups a recipe reads: per field the groups whose first to match text gives its span (ts, host,
// program, pid, level token, RFC 5424 version, PRI, two syslog hosts, the leading column), and the groups whose
// starts are read (the message, the fields before it).
struct RecipeGroups {
  std::array<std::vector<int>, 10> firsts;
  int msg = 0, fields = 0;
};

struct Recipe {
  Span ts, host, prog, pid, tok, pri;      // pri (0, 0): none
  bool matched = false, continues = false, has_body = false;
  HeaderShape shape = HeaderShape::none;
  std::vector<Piece> pieces, body;         // body: where has_body
  int64_t at = 0, status = -1;             // at: where the message starts
  int has = 0;
};

class RecipeReader {
 public:
  // std::invalid_argument where PCRE2 refuses a pattern or a group is not the grammar's.
  RecipeReader(const RecipePatterns& patterns, RecipeGroups groups);

  // `key`'s recipe, all but its status: 1; 0 where the grammar did not match or left the message unset, PCRE2's
  // negative error code where a match stopped short (both: the caller reads the key with the reference).
  int read(std::string_view key, Recipe& out);
  // The status of a key read() with no level (an access log's status code: its level), as read() returns.
  int read_status(std::string_view key, Recipe& out);

 private:
  HeaderMatcher header_, trailer_, status_access_, status_request_, request_, continuation_;
  RecipeGroups groups_;
  std::vector<int64_t> spans_;
};

}  // namespace ribbon
