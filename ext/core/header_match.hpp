#pragma once
// One regular expression compiled by PCRE2 and its JIT: the header grammar of worker/digest/header.py, matched
// on ASCII lines (worker/digest/header_jit.py). 8-bit code units, no UTF: every subject byte is one character.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace ribbon {

// How a pattern is matched: anchored at the offset a match starts from (Python's `match`) or searched from it
// (`search`); multi-line (`^`, `$` at an LF: Python's re.M) or not.
struct MatchOptions {
  bool anchored = true;
  bool multiline = true;
};

class HeaderMatcher {
 public:
  // `pattern` compiled as `options` say (by default anchored, multi-line), LF the only newline, then
  // JIT-compiled. std::invalid_argument (PCRE2's message and offset) where PCRE2 refuses it.
  explicit HeaderMatcher(std::string_view pattern, MatchOptions options = {});
  ~HeaderMatcher();
  HeaderMatcher(const HeaderMatcher&) = delete;
  HeaderMatcher& operator=(const HeaderMatcher&) = delete;

  // The pattern's capturing groups (group 0, the whole match, not counted).
  uint32_t groups() const { return groups_; }
  // The number of the group named `name`, or -1.
  int group_number(const std::string& name) const;

  // Matches `subject` from offset `start` (look-behinds see the text before it, as with Python's
  // `match(s, pos)`); on a match, `spans` holds per group 0..groups() its start and end offsets (-1, -1
  // where the group is unset). Returns 1 on a match, 0 on none, PCRE2's negative error code where the match
  // stopped short (a match limit, the JIT stack): the caller reads that subject another way.
  // One matcher serves one thread at a time (its match data is its own).
  int match(std::string_view subject, std::vector<int64_t>& spans, size_t start = 0);
  // As match(), giving only where group `group` starts (-1: unset) in `at`: no spans copied.
  int find(std::string_view subject, size_t start, uint32_t group, int64_t& at);

 private:
  // pcre2_match's count of groups set (1 or more) on a match, 0 on none, a negative code where it stopped short.
  int run(std::string_view subject, size_t start);
  pcre2_real_code_8* code_ = nullptr;
  pcre2_real_match_data_8* data_ = nullptr;
  pcre2_real_match_context_8* context_ = nullptr;
  pcre2_real_jit_stack_8* stack_ = nullptr;
  uint32_t groups_ = 0;
};

}  // namespace ribbon
