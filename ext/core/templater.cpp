// Line templates of one document: tokenize and mask (one pass over the bytes, templater_tokens.cpp and
// templater_words.cpp), Drain-style merging over the raw templates (few, templater_merge.cpp), then one pass over
// the lines for the value summaries. See templater.hpp for the rules.
#include "templater.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "templater_merge.hpp"
#include "templater_tokens.hpp"

namespace ribbon {
namespace {

// One variable's values: an open-addressing table of value hashes (distinct count, capped) whose
// first track_values entries also count their value (the commonest values come from those). Its first
// kSmall distinct values are kept in a list, looked up in order (most variables of a document have few).
struct VarAcc {
  static constexpr size_t kSmall = 8;
  std::vector<uint64_t> keys;   // 0 = empty (a hash of 0 is stored as 1); empty while the list holds them
  std::vector<uint32_t> slot;   // entry index + 1, or 0 for a value seen but not tracked
  std::vector<std::pair<std::string_view, uint64_t>> entries;
  std::vector<double> nums;
  uint64_t occurrences = 0;
  size_t used = 0;
  bool capped = false;
  uint64_t small[kSmall] = {};  // the hashes of the first distinct values, in order (entries[k] is small[k]'s)

  void add(std::string_view value, const TemplaterConfig& cfg) {
    ++occurrences;
    uint64_t h = hash_bytes(value);
    h = h == 0 ? 1 : h;
    if (keys.empty()) {
      for (size_t k = 0; k < used; ++k)
        if (small[k] == h) {
          if (k < entries.size()) ++entries[k].second;
          return;
        }
      if (used >= cfg.distinct_cap) {
        capped = true;
        return;
      }
      if (used < kSmall) {
        small[used++] = h;
        if (entries.size() < cfg.track_values) entries.emplace_back(value, 1);
        return;
      }
      keys.assign(4 * kSmall, 0);
      slot.assign(4 * kSmall, 0);
      for (size_t k = 0; k < used; ++k) {
        size_t i = static_cast<size_t>(small[k]) & (keys.size() - 1);
        while (keys[i] != 0) i = (i + 1) & (keys.size() - 1);
        keys[i] = small[k];
        slot[i] = k < entries.size() ? static_cast<uint32_t>(k + 1) : 0;
      }
    }
    size_t mask = keys.size() - 1;
    size_t i = static_cast<size_t>(h) & mask;
    while (keys[i] != 0 && keys[i] != h) i = (i + 1) & mask;
    if (keys[i] == h) {
      if (slot[i] != 0) ++entries[slot[i] - 1].second;
      return;
    }
    if (used >= cfg.distinct_cap) {
      capped = true;
      return;
    }
    keys[i] = h;
    ++used;
    if (entries.size() < cfg.track_values) {
      entries.emplace_back(value, 1);
      slot[i] = static_cast<uint32_t>(entries.size());
    }
    if (2 * used > keys.size()) grow();
  }

 private:
  void grow() {
    std::vector<uint64_t> old_keys(keys.size() * 2, 0);
    std::vector<uint32_t> old_slot(slot.size() * 2, 0);
    old_keys.swap(keys);
    old_slot.swap(slot);
    const size_t mask = keys.size() - 1;
    for (size_t j = 0; j < old_keys.size(); ++j) {
      if (old_keys[j] == 0) continue;
      size_t i = static_cast<size_t>(old_keys[j]) & mask;
      while (keys[i] != 0) i = (i + 1) & mask;
      keys[i] = old_keys[j];
      slot[i] = old_slot[j];
    }
  }
};

void finish_summary(VarAcc& acc, const TemplaterConfig& cfg, VarSummary& out) {
  out.occurrences = acc.occurrences;
  out.distinct = acc.used;
  out.distinct_capped = acc.capped;
  out.numeric = acc.nums.size();
  if (!acc.nums.empty()) {
    auto& v = acc.nums;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    out.min = *lo;
    out.max = *hi;
    const size_t m = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
    double med = v[m];
    if (v.size() % 2 == 0) med = 0.5 * (med + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m)));
    out.median = med;
  }
  auto& top = acc.entries;
  const size_t k = std::min<size_t>(cfg.top_values, top.size());
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k), top.end(),
                    [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  for (size_t i = 0; i < k; ++i) out.top.emplace_back(std::string(top[i].first), top[i].second);
}

// A template's text: constants, separators and placeholders; units[v] (when given and not empty) follows the
// v-th variable's placeholder ("for <n> seconds").
std::string make_pattern(const Raw& r, const std::vector<uint8_t>& wild, const std::vector<std::string>& units) {
  std::string pattern;
  size_t v = 0;
  for (size_t p = 0; p < r.toks.size(); ++p) {
    pattern += r.seps[p];
    if (wild[p] || r.is_var[p]) {
      pattern += wild[p] ? "<*>" : placeholder(r.kinds[p]);
      if (v < units.size() && !units[v].empty()) pattern += " " + units[v];
      ++v;
    } else {
      pattern += r.toks[p];
    }
  }
  return pattern + r.seps[r.toks.size()];
}

// The unit word every value of a quantity ends with ("70 seconds", "5 seconds" -> "seconds"), when all its
// distinct values were tracked and there are two or more; else "".
std::string common_unit(const VarAcc& a) {
  if (a.capped || a.used < 2 || a.used != a.entries.size()) return "";
  std::string_view unit;
  for (const auto& [value, n] : a.entries) {
    const size_t sp = value.rfind(' ');
    if (sp == std::string_view::npos || sp + 1 == value.size()) return "";
    const std::string_view u = value.substr(sp + 1);
    if (!std::all_of(u.begin(), u.end(), is_alpha) || (!unit.empty() && u != unit)) return "";
    unit = u;
  }
  return std::string(unit);
}

std::string var_key(const Raw& r, size_t p) {
  if (p == 0 || r.is_var[p - 1]) return "";
  std::string_view k = r.toks[p - 1];
  while (!k.empty() && !is_alpha(k.back()) && !is_digit(k.back()) && k.back() != '_') k.remove_suffix(1);
  return std::string(k);
}

double middle(std::vector<double>& v) {  // the median (mean of the two middle values when even)
  const size_t hi = v.size() / 2, lo = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi), v.end());
  const double upper = v[hi];
  if (lo == hi) return upper;
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi)));
}

// The scores read from the finished pass: each number's z, each line's largest, each template's severity.
void score(Analysis& out, uint32_t min_group) {
  const size_t n_vars = out.templates.empty() ? 0 : out.templates.back().var_base + out.templates.back().vars.size();
  out.num_z = robust_z(out.num_vars, out.num_values, n_vars, min_group);
  out.line_z.assign(out.line_template.size(), 0.0);
  for (size_t j = 0; j < out.num_z.size(); ++j) {
    double& best = out.line_z[static_cast<size_t>(out.num_lines[j])];
    best = std::max(best, out.num_z[j]);
  }
  out.template_severity.assign(out.templates.size(), 0.0F);
  for (size_t l = 0; l < out.line_template.size(); ++l)
    if (out.line_template[l] >= 0) {
      float& s = out.template_severity[static_cast<size_t>(out.line_template[l])];
      s = std::max(s, out.line_severity[l]);
    }
}

}  // namespace

std::vector<double> robust_z(const std::vector<int32_t>& group, const std::vector<double>& values,
                             size_t n_groups, uint32_t min_group) {
  std::vector<double> z(values.size(), 0.0);
  std::vector<uint32_t> start(n_groups + 1, 0);  // counting sort of the values by group
  for (int32_t g : group) ++start[static_cast<size_t>(g) + 1];
  for (size_t g = 0; g < n_groups; ++g) start[g + 1] += start[g];
  std::vector<uint32_t> order(values.size()), fill(start.begin(), start.end() - 1);
  for (uint32_t j = 0; j < values.size(); ++j) order[fill[static_cast<size_t>(group[j])]++] = j;
  std::vector<double> x, dev;
  for (size_t g = 0; g < n_groups; ++g) {
    const uint32_t b = start[g], e = start[g + 1];
    if (e - b < min_group) continue;
    x.clear();
    for (uint32_t i = b; i < e; ++i) x.push_back(values[order[i]]);
    const double med = middle(x);
    dev.clear();
    double sum = 0.0;
    for (uint32_t i = b; i < e; ++i) {
      dev.push_back(std::abs(values[order[i]] - med));
      sum += dev.back();
    }
    std::vector<double> dev_sorted = dev;
    const double mad = middle(dev_sorted);
    const double scale = mad > 0 ? 1.4826 * mad : 1.2533 * sum / static_cast<double>(e - b);
    if (scale <= 0) continue;
    for (uint32_t i = b; i < e; ++i) z[order[i]] = dev[i - b] / scale;
  }
  return z;
}

Templater::Templater(TemplaterConfig config) : cfg_(std::move(config)) {
  if (cfg_.min_merge_tokens < 2)
    throw std::invalid_argument("min_merge_tokens must be >= 2, got " + std::to_string(cfg_.min_merge_tokens));
  for (const auto& w : cfg_.protected_words) protect_.insert(word_code(w));
  protect_.erase(0);
  for (const auto& [w, s] : cfg_.severity) {
    const uint64_t code = word_code(w);
    if (code == 0) throw std::invalid_argument("severity word must be 1-12 letters a-z, got '" + w + "'");
    sev_[code] = s;
    sev_first_[w.size()] |= 1U << (lower(w[0]) - 'a');
  }
}

Analysis analyze_templates(std::string_view text, const TemplaterConfig& config) {
  return Templater(config).analyze(text);
}

Analysis Templater::analyze(std::string_view text) const {
  const TemplaterConfig& cfg = cfg_;
  const auto& protect = protect_;
  const auto& sev = sev_;
  Analysis out;
  std::vector<Raw> raws;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<uint32_t> line_raw;                       // [L] raw template (UINT32_MAX: blank)
  std::vector<uint32_t> span_start, span_len;           // variable spans, line by line
  std::vector<uint32_t> line_span;                      // [L + 1] first span of each line
  std::vector<Token> toks;
  std::vector<std::string> seps;
  std::string key;
  size_t pos = 0;
  uint32_t line_no = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line_span.push_back(static_cast<uint32_t>(span_start.size()));
    out.line_severity.push_back(line_severity(line, sev, sev_first_));
    out.line_clock.push_back(clock_candidate(line) ? 1 : 0);
    tokenize(line, pos, toks, seps);
    if (toks.empty() && seps[0].empty()) {
      line_raw.push_back(UINT32_MAX);
    } else {
      key.clear();
      for (size_t t = 0; t < toks.size(); ++t) {
        key += seps[t];
        key.push_back('\x01');
        if (toks[t].var) key += placeholder(toks[t].kind == VarKind::kHex ? VarKind::kNumber : toks[t].kind);
        else key.append(text.substr(toks[t].start, toks[t].len));
        key.push_back('\x02');
      }
      key += seps.back();
      auto [it, fresh] = index.try_emplace(key, static_cast<uint32_t>(raws.size()));
      if (fresh) {
        Raw r;
        r.seps = seps;
        r.toks.reserve(toks.size());
        r.kinds.reserve(toks.size());
        r.is_var.reserve(toks.size());
        r.var_index.reserve(toks.size());
        int32_t vi = 0;
        for (const Token& tk : toks) {
          r.toks.emplace_back(tk.var ? std::string() : std::string(text.substr(tk.start, tk.len)));
          r.kinds.push_back(tk.var ? tk.kind : VarKind::kOther);
          r.is_var.push_back(tk.var ? 1 : 0);
          r.var_index.push_back(tk.var ? vi++ : -1);
        }
        r.first = line_no;
        raws.push_back(std::move(r));
      }
      Raw& r = raws[it->second];
      if (!fresh)  // one variable, one type: a hex-looking value with or without letters (00106210, 003a90fc)
        for (size_t t = 0; t < toks.size(); ++t)
          if (toks[t].var && toks[t].kind == VarKind::kHex) r.kinds[t] = VarKind::kHex;
      ++r.count;
      r.last = line_no;
      line_raw.push_back(it->second);
      for (const Token& tk : toks)
        if (tk.var) {
          span_start.push_back(tk.start);
          span_len.push_back(tk.len);
        }
    }
    ++line_no;
    pos = end + 1;
  }
  line_span.push_back(static_cast<uint32_t>(span_start.size()));
  out.raw_templates = static_cast<uint32_t>(raws.size());

  // Merge, then number the final templates in order of first appearance.
  std::vector<uint32_t> root = merge_raws(raws, cfg, protect);
  std::vector<std::vector<uint8_t>> wild(raws.size());
  for (uint32_t r = 0; r < raws.size(); ++r) wild[r].assign(raws[r].toks.size(), 0);
  for (uint32_t r = 0; r < raws.size(); ++r) {  // merged positions: where members differ
    const Raw& a = raws[r];
    const Raw& b = raws[root[r]];
    for (size_t p = 0; p < a.toks.size(); ++p)
      if (a.is_var[p] != b.is_var[p] || (a.is_var[p] ? a.kinds[p] != b.kinds[p] : a.toks[p] != b.toks[p]))
        wild[root[r]][p] = 1;
  }
  std::vector<uint32_t> roots;
  for (uint32_t r = 0; r < raws.size(); ++r)
    if (root[r] == r) roots.push_back(r);
  std::vector<uint32_t> first(raws.size(), UINT32_MAX);
  for (uint32_t r = 0; r < raws.size(); ++r) first[root[r]] = std::min(first[root[r]], raws[r].first);
  std::sort(roots.begin(), roots.end(), [&](uint32_t a, uint32_t b) { return first[a] < first[b]; });
  std::vector<int32_t> final_of(raws.size(), -1);
  for (size_t i = 0; i < roots.size(); ++i) final_of[roots[i]] = static_cast<int32_t>(i);

  std::vector<std::vector<size_t>> var_pos(roots.size());  // positions of each template's variables
  uint32_t var_base = 0;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Raw& r = raws[roots[i]];
    LineTemplate t;
    t.first_line = first[roots[i]];
    t.var_base = var_base;
    t.pattern = make_pattern(r, wild[roots[i]], {});
    for (size_t p = 0; p < r.toks.size(); ++p) {
      if (wild[roots[i]][p] || r.is_var[p]) {
        VarSummary v;
        v.key = var_key(r, p);
        v.kind = wild[roots[i]][p] ? VarKind::kMerged : r.kinds[p];
        t.vars.push_back(std::move(v));
        var_pos[i].push_back(p);
      }
    }
    var_base += static_cast<uint32_t>(t.vars.size());
    out.templates.push_back(std::move(t));
  }
  for (uint32_t r = 0; r < raws.size(); ++r) {
    LineTemplate& t = out.templates[static_cast<size_t>(final_of[root[r]])];
    t.count += raws[r].count;
    t.last_line = std::max(t.last_line, raws[r].last);
  }

  // The value summaries and the numbers, line by line.
  std::vector<std::vector<VarAcc>> acc(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) acc[i].resize(var_pos[i].size());
  out.line_template.resize(line_raw.size(), -1);
  for (uint32_t l = 0; l < line_raw.size(); ++l) {
    if (line_raw[l] == UINT32_MAX) continue;
    const Raw& r = raws[line_raw[l]];
    const int32_t f = final_of[root[line_raw[l]]];
    out.line_template[l] = f;
    const LineTemplate& t = out.templates[static_cast<size_t>(f)];
    const auto& positions = var_pos[static_cast<size_t>(f)];
    for (size_t v = 0; v < positions.size(); ++v) {
      const size_t p = positions[v];
      std::string_view value = r.toks[p];
      if (r.is_var[p]) {
        const uint32_t s = line_span[l] + static_cast<uint32_t>(r.var_index[p]);
        value = text.substr(span_start[s], span_len[s]);
      }
      VarAcc& a = acc[static_cast<size_t>(f)][v];
      a.add(value, cfg);
      double x = 0.0;
      if (r.is_var[p] && r.kinds[p] == VarKind::kNumber && parse_number(value, x)) {
        a.nums.push_back(x);
        out.num_values.push_back(x);
        out.num_lines.push_back(static_cast<int32_t>(l));
        out.num_vars.push_back(static_cast<int32_t>(t.var_base + v));
      }
    }
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    std::vector<std::string> units(acc[i].size());  // a quantity whose values share one unit word shows it
    bool any = false;
    for (size_t v = 0; v < acc[i].size(); ++v) {
      if (out.templates[i].vars[v].kind == VarKind::kNumber) units[v] = common_unit(acc[i][v]);
      any = any || !units[v].empty();
      finish_summary(acc[i][v], cfg, out.templates[i].vars[v]);
    }
    if (any) out.templates[i].pattern = make_pattern(raws[roots[i]], wild[roots[i]], units);
  }
  score(out, cfg.min_group);
  return out;
}

}  // namespace ribbon
