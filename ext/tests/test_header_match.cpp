// The header grammar's PCRE2 matcher: anchored, multi-line with LF only, spans per group, unset groups -1,
// patterns past PCRE2's 2-byte links (the build's 4-byte links), a refused pattern named.
#include <stdexcept>
#include <string>
#include <vector>

#include "check.hpp"
#include "header_match.hpp"

using ribbon::HeaderMatcher;

TEST(header_match_spans_per_group_and_unset_groups) {
  HeaderMatcher m("(?P<lv>[A-Z]+)(?: (?P<pid>\\d+))?(?:: (?P<msg>.*))?$");
  CHECK(m.groups() == 3);
  CHECK(m.group_number("msg") == 3 && m.group_number("none") == -1);
  std::vector<int64_t> s;
  CHECK(m.match("WARN: disk full", s) == 1);
  CHECK((s == std::vector<int64_t>{0, 15, 0, 4, -1, -1, 6, 15}));
  CHECK(m.match("ERROR 42", s) == 1);
  CHECK((s == std::vector<int64_t>{0, 8, 0, 5, 6, 8, -1, -1}));
}

TEST(header_match_is_anchored_and_lf_is_the_only_newline) {
  HeaderMatcher m("[a-z]+$");
  std::vector<int64_t> s;
  CHECK(m.match("  abc", s) == 0);             // anchored at the start, never searched
  CHECK(m.match("abc\r", s) == 0);             // CR is no newline: `$` not before it
  CHECK(m.match("abc\ndef", s) == 1 && s[1] == 3);   // `$` before an LF (multi-line)
}

TEST(header_match_compiles_past_two_byte_links) {
  std::string alternation = "(?:";
  for (int i = 0; i < 12000; ++i) alternation += "w" + std::to_string(i) + "x|";
  alternation += "end)";
  HeaderMatcher m(alternation);                 // > 64K code units: refused with PCRE2's default links
  std::vector<int64_t> s;
  CHECK(m.match("w11999x", s) == 1 && s[1] == 7);
}

TEST(header_match_names_a_refused_pattern) {
  bool thrown = false;
  try {
    HeaderMatcher m("(unclosed");
  } catch (const std::invalid_argument& e) {
    thrown = std::string(e.what()).find("missing closing parenthesis") != std::string::npos;
  }
  CHECK(thrown);
}

TEST(header_match_searches_from_an_offset_when_not_anchored) {
  HeaderMatcher m("(b+)$", ribbon::MatchOptions{false, false});
  std::vector<int64_t> s;
  CHECK(m.match("abb abbb", s, 0) == 1 && s[0] == 5 && s[1] == 8);   // searched; `$` at the end only
  CHECK(m.match("abb\nabbb", s, 0) == 1 && s[0] == 5);                // not multi-line: `$` not before an LF
  int64_t at = 0;
  CHECK(m.find("abb abbb", 6, 1, at) == 1 && at == 6);                // from an offset, a group's start
  CHECK(m.find("abb abbb", 8, 1, at) == 0);
}

TEST(header_match_anchored_at_an_offset_sees_what_is_before_it) {
  HeaderMatcher m("(?<=\")(\\d+)", ribbon::MatchOptions{true, false});   // Python's match(s, pos)
  int64_t at = 0;
  CHECK(m.find("x \"42", 3, 1, at) == 1 && at == 3);
  CHECK(m.find("x \"42", 2, 1, at) == 0);                                // anchored at 2: a quote, no digit
  CHECK(m.find("x 42", 2, 1, at) == 0);                                   // no quote before it
}
