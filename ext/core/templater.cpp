// Line templates of one document: tokenize and mask (one pass over the bytes, templater_tokens.cpp),
// Drain-style merging over the raw templates (few, templater_merge.cpp), then one pass over the lines
// for the value summaries (templater_values.cpp). See templater.hpp for the rules.
#include "templater.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "templater_merge.hpp"
#include "templater_tokens.hpp"
#include "templater_values.hpp"

namespace ribbon {
namespace {

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

std::string var_key(const Raw& r, size_t p) {
  if (p == 0 || r.is_var[p - 1]) return "";
  std::string_view k = r.toks[p - 1];
  while (!k.empty() && !is_alpha(k.back()) && !is_digit(k.back()) && k.back() != '_') k.remove_suffix(1);
  return std::string(k);
}

}  // namespace

Templater::Templater(TemplaterConfig config) : cfg_(std::move(config)) {
  if (cfg_.min_merge_tokens < 2)
    throw std::invalid_argument("min_merge_tokens must be >= 2, got " + std::to_string(cfg_.min_merge_tokens));
  for (const auto& w : cfg_.protected_words) protect_.insert(word_code(w));
  protect_.erase(0);
  for (const auto& [w, s] : cfg_.severity) {
    const uint64_t code = word_code(w);
    if (code == 0) throw std::invalid_argument("severity word must be 1-12 letters a-z, got '" + w + "'");
    sev_[code] = s;
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
    out.line_severity.push_back(line_severity(line, sev));
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
