// The value summaries of a template's variables and the outlier scores (robust z) of its numbers.
// Internal to the templater (templater.cpp runs the pass); the public API is templater.hpp.
#include "templater_values.hpp"

#include <algorithm>
#include <cmath>

namespace ribbon {
namespace {

double middle(std::vector<double>& v) {  // the median (mean of the two middle values when even)
  const size_t hi = v.size() / 2, lo = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi), v.end());
  const double upper = v[hi];
  if (lo == hi) return upper;
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi)));
}

}  // namespace

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

}  // namespace ribbon
