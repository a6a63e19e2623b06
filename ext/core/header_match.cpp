#include "header_match.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace ribbon {

namespace {
constexpr size_t kJitStackMax = 8u << 20;   // grown on demand up to this; PCRE2's default is 32 KiB
}

HeaderMatcher::HeaderMatcher(std::string_view pattern, MatchOptions options) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        (options.anchored ? PCRE2_ANCHORED : 0u) | (options.multiline ? PCRE2_MULTILINE : 0u),
                        &error, &offset, cc);
  pcre2_compile_context_free(cc);
  if (code_ == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("PCRE2 refuses the pattern at offset " + std::to_string(offset) + ": " +
                                reinterpret_cast<const char*>(message));
  }
  const int jit = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  if (jit != 0) {
    pcre2_code_free(code_);
    throw std::invalid_argument("PCRE2's JIT refuses the pattern (error " + std::to_string(jit) + ")");
  }
  pcre2_pattern_info(code_, PCRE2_INFO_CAPTURECOUNT, &groups_);
  data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  context_ = pcre2_match_context_create(nullptr);
  stack_ = pcre2_jit_stack_create(32u << 10, kJitStackMax, nullptr);
  pcre2_jit_stack_assign(context_, nullptr, stack_);
}

HeaderMatcher::~HeaderMatcher() {
  pcre2_jit_stack_free(stack_);
  pcre2_match_context_free(context_);
  pcre2_match_data_free(data_);
  pcre2_code_free(code_);
}

int HeaderMatcher::group_number(const std::string& name) const {
  const int n = pcre2_substring_number_from_name(code_, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
  return n > 0 ? n : -1;
}

int HeaderMatcher::run(std::string_view subject, size_t start) {
  const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, 0, data_,
                             context_);
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc == 0) return PCRE2_ERROR_NOMEMORY;   // an ovector too short: not with match data made for the pattern
  return rc;
}

int HeaderMatcher::match(std::string_view subject, std::vector<int64_t>& spans, size_t start) {
  const int rc = run(subject, start);
  if (rc <= 0) return rc;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
  const size_t n = 2 * (static_cast<size_t>(groups_) + 1);
  spans.assign(n, -1);
  const size_t set = 2 * static_cast<size_t>(rc);   // groups past the last that matched stay unset
  for (size_t i = 0; i < set && i < n; ++i) {
    if (ov[i] != PCRE2_UNSET) spans[i] = static_cast<int64_t>(ov[i]);
  }
  return 1;
}

int HeaderMatcher::find(std::string_view subject, size_t start, uint32_t group, int64_t& at) {
  const int rc = run(subject, start);
  if (rc <= 0) return rc;
  const PCRE2_SIZE a = group < static_cast<uint32_t>(rc) ? pcre2_get_ovector_pointer(data_)[2 * group] : PCRE2_UNSET;
  at = a == PCRE2_UNSET ? -1 : static_cast<int64_t>(a);
  return 1;
}

}  // namespace ribbon
