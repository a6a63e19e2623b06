// Drain-style merging of raw templates (see templater.hpp for the rules): families of raw templates
// equal but for one position, joined round after round. Internal to the templater.
#include "templater_merge.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "templater_tokens.hpp"

namespace ribbon {
namespace {

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0U); }
  uint32_t find(uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(uint32_t a, uint32_t b) { parent_[find(b)] = find(a); }

 private:
  std::vector<uint32_t> parent_;
};

struct Group {             // a merge group's current pattern (owned by its root raw template)
  std::vector<uint8_t> wild;  // merged positions
};

// Token identity at a position for merging: a constant's hash, or its kind for a variable.
uint64_t position_hash(const Raw& r, const Group& g, size_t p) {
  const uint64_t sep = hash_bytes(r.seps[p]);
  if (g.wild[p]) return mix(sep, 0xFFFFULL);
  if (r.is_var[p]) return mix(sep, 0xFF00ULL + static_cast<uint64_t>(r.kinds[p]));
  return mix(sep, hash_bytes(r.toks[p]));
}

bool same_except(const Raw& a, const Group& ga, const Raw& b, const Group& gb, size_t skip) {
  const size_t n = a.toks.size();
  if (b.toks.size() != n || a.seps[n] != b.seps[n]) return false;
  for (size_t p = 0; p < n; ++p) {
    if (a.seps[p] != b.seps[p]) return false;
    if (p == skip) continue;
    if (ga.wild[p] != gb.wild[p] || a.is_var[p] != b.is_var[p]) return false;
    if (ga.wild[p]) continue;
    if (a.is_var[p] ? a.kinds[p] != b.kinds[p] : a.toks[p] != b.toks[p]) return false;
  }
  return true;
}

// A constant word: letters (and _ - . inside), digits at most after the first letter, punctuation
// only at its ends ("Starting", "getTasks:", "WakeLocks.", "awdl0").
bool word_token(std::string_view t) {
  size_t a = 0, b = t.size();
  while (a < b && !is_alpha(t[a]) && !is_digit(t[a])) ++a;
  while (b > a && !is_alpha(t[b - 1]) && !is_digit(t[b - 1])) --b;
  if (a == b || !is_alpha(t[a])) return false;
  for (size_t i = a; i < b; ++i)
    if (!is_alpha(t[i]) && !is_digit(t[i]) && t[i] != '_' && t[i] != '-' && t[i] != '.') return false;
  return true;
}

}  // namespace

// Drain-style merging: raw templates that differ in one unprotected position join, round after
// round, while a template keeps at most a third of its positions merged. Returns each raw's root.
std::vector<uint32_t> merge_raws(const std::vector<Raw>& raws, const TemplaterConfig& cfg,
                                 const std::unordered_set<uint64_t>& protect) {
  UnionFind uf(raws.size());
  std::vector<Group> groups(raws.size());
  for (size_t r = 0; r < raws.size(); ++r) groups[r].wild.assign(raws[r].toks.size(), 0);
  if (!cfg.merge) {
    std::vector<uint32_t> roots(raws.size());
    std::iota(roots.begin(), roots.end(), 0U);
    return roots;
  }
  auto guarded = [&](const Raw& r, size_t p) {
    return !r.is_var[p] && protect.count(core_code(r.toks[p])) > 0;
  };
  std::vector<uint64_t> ph, prefix, suffix;
  // Families: raw templates equal but for one position. In a small family the constant words there are
  // different messages (Starting/Ending, Paused/Resumed, GET/POST), not values of one variable.
  auto family_keys = [&](const Raw& raw, const Group& g, std::vector<uint64_t>& keys) {
    const size_t n = raw.toks.size();
    ph.assign(n, 0);
    prefix.assign(n + 1, n);
    suffix.assign(n + 1, hash_bytes(raw.seps[n]));
    for (size_t p = 0; p < n; ++p) ph[p] = position_hash(raw, g, p);
    for (size_t p = 0; p < n; ++p) prefix[p + 1] = mix(prefix[p], ph[p]);
    for (size_t p = n; p-- > 0;) suffix[p] = mix(suffix[p + 1], ph[p]);
    keys.resize(n);
    for (size_t p = 0; p < n; ++p) keys[p] = mix(mix(prefix[p], suffix[p + 1]), p);
  };
  std::unordered_map<uint64_t, uint32_t> family;
  std::vector<uint64_t> keys;
  if (cfg.word_family > 0)
    for (uint32_t r = 0; r < raws.size(); ++r) {
      if (raws[r].toks.size() < cfg.min_merge_tokens) continue;
      family_keys(raws[r], groups[r], keys);
      for (uint64_t k : keys) ++family[k];
    }
  auto small_family_word = [&](const Raw& a, const Raw& b, size_t p, uint64_t key) {
    if (cfg.word_family == 0 || a.is_var[p] || b.is_var[p] || !word_token(a.toks[p]) || !word_token(b.toks[p]))
      return false;
    auto it = family.find(key);
    return it != family.end() && it->second <= cfg.word_family;
  };
  for (bool changed = true; changed;) {
    changed = false;
    std::unordered_map<uint64_t, uint32_t> seen;
    for (uint32_t r = 0; r < raws.size(); ++r) {
      if (uf.find(r) != r) continue;
      const Raw& raw = raws[r];
      const size_t n = raw.toks.size();
      if (n < cfg.min_merge_tokens) continue;
      Group& g = groups[r];
      const size_t wild = static_cast<size_t>(std::count(g.wild.begin(), g.wild.end(), 1));
      family_keys(raw, g, keys);
      for (size_t p = 0; p < n && uf.find(r) == r; ++p) {
        if (g.wild[p] || guarded(raw, p) || 3 * (wild + 1) > n) continue;
        const uint64_t key = keys[p];
        auto [it, fresh] = seen.emplace(key, r);
        if (fresh) continue;
        const uint32_t other = uf.find(it->second);
        if (other == r || guarded(raws[other], p) || small_family_word(raws[other], raw, p, key) ||
            !same_except(raws[other], groups[other], raw, g, p))
          continue;
        uf.join(other, r);
        groups[other].wild[p] = 1;
        changed = true;
      }
    }
  }
  std::vector<uint32_t> roots(raws.size());
  for (uint32_t r = 0; r < raws.size(); ++r) roots[r] = uf.find(r);
  return roots;
}

}  // namespace ribbon
