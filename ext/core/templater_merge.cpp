// Drain-style merging of a document's raw templates (templater_merge.hpp): families of raw templates equal
// but for one position, which of them are different messages, and the rounds of one-position merges.
#include "templater_merge.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <utility>

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

struct Group {        // a merge group's current pattern (owned by its root raw template)
  uint8_t* wild;      // [positions] merged positions (in the merge's one flat array)
};

// An open-addressing map of 64-bit hashes to 32-bit values (linear probing, a power-of-two table): the merge's
// tables, without a node allocated per entry.
class HashIndex {
 public:
  void reset(size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap <<= 1;
    keys_.assign(cap, 0);
    vals_.assign(cap, kEmpty);
    used_ = 0;
  }
  // The value under `key`, `value` inserted when it had none; second: whether it was inserted.
  std::pair<uint32_t, bool> emplace(uint64_t key, uint32_t value) {
    if (2 * (used_ + 1) > keys_.size()) grow();
    const size_t i = slot(key);
    if (vals_[i] != kEmpty) return {vals_[i], false};
    keys_[i] = key;
    vals_[i] = value;
    ++used_;
    return {value, true};
  }
  uint32_t find(uint64_t key) const { return keys_.empty() ? kEmpty : vals_[slot(key)]; }
  static constexpr uint32_t kEmpty = UINT32_MAX;

 private:
  size_t slot(uint64_t key) const {
    const size_t mask = keys_.size() - 1;
    size_t i = static_cast<size_t>(key) & mask;
    while (vals_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<uint64_t> keys;
    std::vector<uint32_t> vals;
    keys.swap(keys_);
    vals.swap(vals_);
    reset(keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      if (vals[i] != kEmpty) emplace(keys[i], vals[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t used_ = 0;
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

// A token's text with punctuation stripped at both ends ("down:" -> "down", "'Active'" -> "Active").
std::string_view core_text(std::string_view t) {
  size_t a = 0, b = t.size();
  while (a < b && !is_alpha(t[a]) && !is_digit(t[a])) ++a;
  while (b > a && !is_alpha(t[b - 1]) && !is_digit(t[b - 1])) --b;
  return t.substr(a, b - a);
}

// An event word: a participle or gerund of five or more letters (Started, Paused, opened, LOOKING). Raw templates
// that differ only in such words say different things happened, however many there are.
bool event_word(std::string_view w) {
  if (w.size() < 5 || !std::all_of(w.begin(), w.end(), is_alpha)) return false;
  auto ends = [&](std::string_view suffix) {
    if (w.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i)
      if (lower(w[w.size() - suffix.size() + i]) != suffix[i]) return false;
    return true;
  };
  return ends("ed") || ends("ing");
}

}  // namespace

std::vector<uint32_t> merge_raws(const std::vector<Raw>& raws, const TemplaterConfig& cfg,
                                 const std::unordered_set<uint64_t>& protect) {
  if (!cfg.merge) {
    std::vector<uint32_t> roots(raws.size());
    std::iota(roots.begin(), roots.end(), 0U);
    return roots;
  }
  UnionFind uf(raws.size());
  // Per raw and position, computed once: the hash of its separator, its identity (position_hash unmerged) and
  // whether it holds a protected word; base[r] is raw r's first entry.
  std::vector<size_t> base(raws.size() + 1, 0);
  for (size_t r = 0; r < raws.size(); ++r) base[r + 1] = base[r] + raws[r].toks.size();
  std::vector<uint8_t> wild_at(base.back(), 0);
  std::vector<Group> groups(raws.size());
  for (size_t r = 0; r < raws.size(); ++r) groups[r].wild = wild_at.data() + base[r];
  std::vector<uint64_t> sep_h(base.back()), pos_h(base.back());
  std::vector<uint8_t> guard(base.back());
  for (size_t r = 0; r < raws.size(); ++r)
    for (size_t p = 0; p < raws[r].toks.size(); ++p) {
      const Raw& raw = raws[r];
      sep_h[base[r] + p] = hash_bytes(raw.seps[p]);
      pos_h[base[r] + p] = position_hash(raw, groups[r], p);
      guard[base[r] + p] = !raw.is_var[p] && protect.count(core_code(raw.toks[p])) > 0;
    }
  auto guarded = [&](uint32_t r, size_t p) { return guard[base[r] + p] != 0; };
  std::vector<uint64_t> prefix, suffix;
  // Families: raw templates equal but for one position. In a small family the constant words there are
  // different messages (Starting/Ending, GET/POST, Active/Removable), not values of one variable, unless each of
  // them is a value elsewhere in the document; event words (Paused/Resumed/Started/Stopped) are, in any family.
  auto family_keys = [&](uint32_t r, const Group& g, std::vector<uint64_t>& keys) {
    const Raw& raw = raws[r];
    const size_t n = raw.toks.size();
    const uint64_t* sh = sep_h.data() + base[r];
    const uint64_t* ph = pos_h.data() + base[r];
    auto at = [&](size_t p) { return g.wild[p] ? mix(sh[p], 0xFFFFULL) : ph[p]; };
    prefix.assign(n + 1, n);
    suffix.assign(n + 1, hash_bytes(raw.seps[n]));
    for (size_t p = 0; p < n; ++p) prefix[p + 1] = mix(prefix[p], at(p));
    for (size_t p = n; p-- > 0;) suffix[p] = mix(suffix[p + 1], at(p));
    keys.resize(n);
    for (size_t p = 0; p < n; ++p) keys[p] = mix(mix(prefix[p], suffix[p + 1]), p);
  };
  // Per family: its size, whether every member holds an event word there, whether every member's word there is
  // a value of a large family (one that merges) at some position of the document.
  struct Family {
    uint32_t count = 0;
    bool events = true, values = true;  // every member's word there is an event word / a value elsewhere
    bool some_event = false;            // a member's word there is an event word
  };
  std::vector<Family> families;
  HashIndex family;              // family key -> index in families
  family.reset(base.back());
  std::vector<uint32_t> at;      // the family of each (raw, position) of a raw that may merge, raw by raw
  std::vector<uint32_t> at_raw;  // its raw
  std::vector<uint64_t> keys;
  auto word_at = [&](const Raw& r, size_t p) { return r.is_var[p] ? std::string_view() : core_text(r.toks[p]); };
  for (uint32_t r = 0; r < raws.size(); ++r) {
    if (raws[r].toks.size() < cfg.min_merge_tokens) continue;
    family_keys(r, groups[r], keys);
    for (size_t p = 0; p < keys.size(); ++p) {
      const auto [f_at, fresh] = family.emplace(keys[p], static_cast<uint32_t>(families.size()));
      if (fresh) families.emplace_back();
      Family& f = families[f_at];
      ++f.count;
      const bool event = !raws[r].is_var[p] && word_token(raws[r].toks[p]) && event_word(word_at(raws[r], p));
      f.events = f.events && event;
      f.some_event = f.some_event || event;
      at.push_back(f_at);
      at_raw.push_back(r);
    }
  }
  std::unordered_set<uint64_t> value_words;  // words at a position where more than word_family raws differ
  for (size_t i = 0, p = 0; i < at.size(); ++i, ++p) {
    if (i > 0 && at_raw[i] != at_raw[i - 1]) p = 0;
    const Raw& r = raws[at_raw[i]];
    const Family& f = families[at[i]];
    if (f.count > cfg.word_family && !f.events && word_token(r.toks[p])) value_words.insert(hash_bytes(word_at(r, p)));
  }
  for (size_t i = 0, p = 0; i < at.size(); ++i, ++p) {
    if (i > 0 && at_raw[i] != at_raw[i - 1]) p = 0;
    const Raw& r = raws[at_raw[i]];
    Family& f = families[at[i]];
    f.values = f.values && !r.is_var[p] && !value_words.empty() && value_words.count(hash_bytes(word_at(r, p))) > 0;
  }
  auto family_of = [&](uint64_t key) -> const Family* {
    const uint32_t i = family.find(key);
    return i == HashIndex::kEmpty ? nullptr : &families[i];
  };
  // A small family's words are different messages unless each is a value elsewhere; event words always are.
  auto small_family_word = [&](const Raw& a, const Raw& b, size_t p, uint64_t key) {
    if (cfg.word_family == 0 || a.is_var[p] || b.is_var[p] || !word_token(a.toks[p]) || !word_token(b.toks[p]))
      return false;
    const Family* f = family_of(key);
    return f != nullptr && (f->events || (f->count <= cfg.word_family && !f->values));
  };
  // A line of two tokens merges at one position when its other token is constant and more than word_family
  // raw templates differ there (evicting alpha/beta/gamma/delta), none of them in an event word (link
  // closed/reset/refused/timeout: with one constant beside it, one event word says they are what happened).
  auto two_token_merge = [&](const Raw& raw, size_t wild, size_t p) {
    if (wild > 0 || raw.is_var[1 - p]) return false;
    const Family* f = family_of(keys[p]);
    return f != nullptr && f->count > cfg.word_family && !f->some_event;
  };
  HashIndex seen;  // per round: family key -> the first raw seen with it
  for (bool changed = true; changed;) {
    changed = false;
    seen.reset(base.back());
    for (uint32_t r = 0; r < raws.size(); ++r) {
      if (uf.find(r) != r) continue;
      const Raw& raw = raws[r];
      const size_t n = raw.toks.size();
      if (n < cfg.min_merge_tokens) continue;
      Group& g = groups[r];
      const size_t wild = static_cast<size_t>(std::count(g.wild, g.wild + n, 1));
      family_keys(r, g, keys);
      for (size_t p = 0; p < n && uf.find(r) == r; ++p) {
        if (g.wild[p] || guarded(r, p) || (n == 2 ? !two_token_merge(raw, wild, p) : 3 * (wild + 1) > n)) continue;
        const uint64_t key = keys[p];
        const auto [first, fresh] = seen.emplace(key, r);
        if (fresh) continue;
        const uint32_t other = uf.find(first);
        if (other == r || guarded(other, p) || small_family_word(raws[other], raw, p, key) ||
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
