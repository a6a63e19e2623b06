#pragma once
// Line templates of one document in one pass (issue 8): the digest, the
// compacted prompt and the highlight scorer all read this one result.
//
// A line is cut into tokens at whitespace and at = ; , [ ] ( ) { } | < >  (a quoted
// "..." is one token; name(args) with no whitespace inside is one token, e.g. LOCAL(0) or init();
// an empty () [] {} holds one empty variable token, so "(host)" and "()" share a template).
// A token is a variable when it carries a number, a hex id,
// an IP (and port), a UUID, a timestamp or is quoted, or when it is the value of a
// key=value; short names such as S1, T300 or eth0 stay constant. Equal masked
// lines form a raw template. Raw templates of equal length that differ in one
// position merge (the Drain idea) unless that position holds a protected word
// (severity and level words), repeatedly, so a merged template may carry several
// merged positions. Every template keeps its count, first and last line, and per
// variable a value summary. Pure C++17, single-threaded, no Python.
//
// Why not Drain3: it is a maintained library, but it groups fewer lines right on every
// development system of `python -m bench.quality` and parses in Python per line; the goal is
// >= 200k lines/s per core (docs/digest.md). Tokens: templater_tokens.{hpp,cpp}; how each reads:
// templater_classify.cpp; merging: templater_merge.{hpp,cpp}; value summaries: templater_values.{hpp,cpp}.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ribbon {

enum class VarKind : uint8_t { kNumber, kHex, kIp, kUuid, kTime, kQuoted, kOther, kMerged };

const char* var_kind_name(VarKind k);

struct TemplaterConfig {
  std::vector<std::string> protected_words;                  // lowercase; a merge never masks them
  std::vector<std::pair<std::string, double>> severity;      // lowercase word -> score (line severity)
  uint32_t top_values = 5;       // commonest values kept per variable
  uint32_t track_values = 1024;  // distinct values counted exactly per variable (top values among them)
  uint32_t distinct_cap = 65536; // distinct count is exact up to this, then a lower bound
  uint32_t min_merge_tokens = 3; // shorter lines never merge
  bool merge = true;
  uint32_t word_family = 3;      // constant words that differ at one position stay apart when at most this many
                                 // raw templates differ only there (0: always merge)
  uint32_t min_group = 5;        // numbers of one variable needed before outliers are scored
};

struct VarSummary {
  std::string key;     // the key of key=value, else the constant token before it (may be empty)
  VarKind kind = VarKind::kOther;  // the kind of its first value (kMerged: a merged constant position)
  uint64_t occurrences = 0;
  uint64_t distinct = 0;
  bool distinct_capped = false;
  uint64_t numeric = 0;  // values that read as numbers
  double min = 0.0, median = 0.0, max = 0.0;
  std::vector<std::pair<std::string, uint64_t>> top;  // commonest values, count descending
};

struct LineTemplate {
  std::string pattern;   // constants, separators and <n> <hex> <ip> <uuid> <ts> <q> <*> placeholders
  uint64_t count = 0;
  uint32_t first_line = 0, last_line = 0;  // 0-based line indices
  std::vector<VarSummary> vars;            // in position order
  uint32_t var_base = 0;                   // global id of vars[0] (see Analysis::num_vars)
};

struct Analysis {
  std::vector<int32_t> line_template;  // [L] template of each line, -1 for a blank line
  std::vector<float> line_severity;    // [L] highest severity word of each line (0 if none)
  std::vector<uint8_t> line_clock;     // [L] 1: the line's head may hold a timestamp (see clock_candidate)
  std::vector<double> num_values;      // [T] every numeric variable value, line by line
  std::vector<int32_t> num_lines;      // [T] its line
  std::vector<int32_t> num_vars;       // [T] its variable: template var_base + index in vars
  std::vector<double> num_z;           // [T] robust z of each number among its variable's values
  std::vector<double> line_z;          // [L] largest num_z of each line (0 if none)
  std::vector<float> template_severity;  // [K] highest line severity over each template's lines
  std::vector<LineTemplate> templates; // in order of first appearance
  uint32_t raw_templates = 0;          // before merging
};

// A templater with its configuration read once (word tables hashed), reused across documents.
// analyze() is const and keeps no state between calls: one object may serve many threads.
class Templater {
 public:
  explicit Templater(TemplaterConfig config);
  // The templates of `text` (lines separated by '\n'; a trailing '\r' is ignored).
  Analysis analyze(std::string_view text) const;
  const TemplaterConfig& config() const { return cfg_; }

 private:
  TemplaterConfig cfg_;
  std::unordered_set<uint64_t> protect_;    // word codes of protected words
  std::unordered_map<uint64_t, double> sev_;  // word code -> severity score
};

// One-off form of Templater(config).analyze(text).
Analysis analyze_templates(std::string_view text, const TemplaterConfig& config);

// Robust z of each value within its group (groups of fewer than min_group values get 0):
// |x - median| / (1.4826 MAD), or / (1.2533 mean absolute deviation) when MAD is 0.
// group[i] in [0, n_groups). The outlier rule of worker/digest/outliers.py, in one pass.
std::vector<double> robust_z(const std::vector<int32_t>& group, const std::vector<double>& values,
                             size_t n_groups, uint32_t min_group);

// Whether a line's first 104 characters hold `d:dd:dd`, or the line starts with `[`? and 10 digits, or with
// `dddddd dddddd`: every timestamp form of worker/digest/timeparse.py does (its _CANDIDATE), so
// lines without it need no parsing there.
bool clock_candidate(std::string_view line);

// How one token reads (exposed for tests): true and its kind when it is a variable.
bool classify_token(std::string_view token, VarKind& kind);

// The leading number of a value ("35ms" -> 35, "-1.5e3" -> -1500); false when it has none.
bool parse_number(std::string_view token, double& out);

}  // namespace ribbon
