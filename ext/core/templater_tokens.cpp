// Tokens of a log line: cutting (tokenize) and joining runs that are one value (quantities, dates,
// lists). Internal to the templater (templater.cpp); how a token reads: templater_classify.cpp.
#include "templater_tokens.hpp"

#include <algorithm>
#include <iterator>

namespace ribbon {
namespace {

struct DelimTable {  // whitespace and = ; , [ ] ( ) { } | < >
  bool at[256] = {};
  DelimTable() {
    for (char c : std::string_view(" \t\r\v\f=;,[](){}|<>")) at[static_cast<unsigned char>(c)] = true;
  }
};
const DelimTable kDelims;
bool is_delim(char c) { return kDelims.at[static_cast<unsigned char>(c)]; }

bool closes(char open, char c) { return (open == '(' && c == ')') || (open == '[' && c == ']') || (open == '{' && c == '}'); }

// The end (one past ')') of "(...)" opening at `at` right after a name, when no whitespace or bracket
// comes before its ')'; else 0.
size_t call_end(std::string_view line, size_t at) {
  for (size_t k = at + 1; k < line.size() && k < at + 64; ++k) {
    const char c = line[k];
    if (c == ')') return k + 1;
    if (is_space(c) || c == '(' || c == '[' || c == ']' || c == '"' || c == '=' || c == ',' || c == ';') return 0;
  }
  return 0;
}

// Quantities as one variable, so lines that write them in more or fewer words share a template:
// a number and its unit word ("12 KB"), then a number and a bracketed number right after it, its
// conversion ("1234 bytes (1.2 KB)").
void fuse_quantities(std::string_view line, size_t base, std::vector<Token>& toks, std::vector<std::string>& seps) {
  bool any = false;  // most lines hold no quantity in words: leave them untouched
  for (size_t k = 1; k < toks.size() && !any; ++k) {
    const Token& prev = toks[k - 1];
    if (!prev.var || prev.kind != VarKind::kNumber) continue;
    any = (!toks[k].var && seps[k] == " " && unit_word(line.substr(toks[k].start - base, toks[k].len))) ||
          (toks[k].var && seps[k] == " (");
  }
  if (!any) return;
  std::vector<Token> kt;  // kept tokens; ks[i] is the separator before kt[i], ks.back() the one after the last
  std::vector<std::string> ks{seps[0]};
  for (int pass = 0; pass < 2; ++pass) {
    kt.clear();
    ks.assign(1, seps[0]);
    for (size_t k = 0; k < toks.size(); ++k) {
      const Token& t = toks[k];
      if (!kt.empty()) {
        Token& prev = kt.back();
        const std::string_view text = line.substr(t.start - base, t.len);
        if (pass == 0 && prev.var && prev.kind == VarKind::kNumber && !t.var && seps[k] == " " && unit_word(text)) {
          prev.len = t.start + t.len - prev.start;
          ks.back() = seps[k + 1];
          continue;
        }
        if (pass == 1 && prev.var && t.var && prev.kind == VarKind::kNumber && t.kind == VarKind::kNumber &&
            seps[k] == " (" && !seps[k + 1].empty() && seps[k + 1][0] == ')') {
          prev.len = t.start + t.len + 1 - prev.start;  // through the ')'
          ks.back() = seps[k + 1].substr(1);
          std::string& after = ks.back();
          if (k + 1 == toks.size()) after.erase(std::remove(after.begin(), after.end(), ' '), after.end());
          continue;
        }
      }
      kt.push_back(t);
      ks.push_back(seps[k + 1]);
    }
    toks.swap(kt);
    seps.swap(ks);
  }
}

// Replaces each run [k, run(k)) of two or more tokens with one token spanning it, finished by `merge`; the
// separator after a run follows its token. run(k) <= k + 1 leaves toks[k] as it is.
template <class Run, class Merge>
void merge_runs(std::vector<Token>& toks, std::vector<std::string>& seps, Run run, Merge merge) {
  std::vector<Token> kt;
  std::vector<std::string> ks{seps[0]};
  for (size_t k = 0; k < toks.size();) {
    const size_t e = std::max(run(k), k + 1);
    Token t = toks[k];
    if (e - k >= 2) {
      t.len = toks[e - 1].start + toks[e - 1].len - t.start;
      merge(t);
    }
    kt.push_back(t);
    ks.push_back(seps[e]);
    k = e;
  }
  toks.swap(kt);
  seps.swap(ks);
}

// A date written in words and numbers (Sun Jul 17 01:47:22 2005, 17 Jul 2005) is one time variable: a run of
// time tokens and short integers joined by single spaces, holding a month or weekday name or two time tokens.
void fuse_times(std::vector<Token>& toks, std::vector<std::string>& seps, std::string_view line, size_t base) {
  auto part = [&](const Token& t) {
    if (!t.var) return 0;
    if (t.kind == VarKind::kTime) return is_digit(line[t.start - base]) ? 2 : 3;  // 3: a calendar word
    if (t.kind != VarKind::kNumber || t.len > 4) return 0;
    for (size_t c = 0; c < t.len; ++c)
      if (!is_digit(line[t.start - base + c])) return 0;
    return 1;
  };
  auto run = [&](size_t k) {
    if (part(toks[k]) == 0) return k + 1;
    size_t e = k;  // the run [k, e)
    int times = 0;
    bool word = false;
    do {
      times += part(toks[e]) >= 2;
      word = word || part(toks[e]) == 3;
      ++e;
    } while (e < toks.size() && seps[e] == " " && part(toks[e]) > 0);
    return e - k >= 2 && (word || times >= 2) ? e : k + 1;
  };
  merge_runs(toks, seps, run, [](Token& t) { t.kind = VarKind::kTime; });
}

// A list written as words (channels 1 2 3 4 5, nodes an14 an15 an16 an17, frames a.b:1 c.d:2 e.f:3 g.h:4) is
// one variable whatever its length: a run of four or more tokens joined by single spaces, each a variable of
// one kind, or each a short name with the same letters before its digits.
void fold_lists(std::vector<Token>& toks, std::vector<std::string>& seps, std::string_view line, size_t base) {
  auto stem = [&](const Token& t) -> std::string_view {  // "an" of an14; empty when not a short name with digits
    const std::string_view s = line.substr(t.start - base, t.len);
    size_t k = 0;
    while (k < s.size() && is_alpha(s[k])) ++k;
    if (t.var || k == 0 || k == s.size() || !short_name(s)) return {};
    return s.substr(0, k);
  };
  auto same = [&](const Token& a, const Token& b) {
    if (a.var || b.var) return a.var && b.var && a.kind == b.kind && a.kind != VarKind::kTime;
    const std::string_view sa = stem(a);
    return !sa.empty() && sa == stem(b);
  };
  auto run = [&](size_t k) {
    size_t e = k + 1;
    while (e < toks.size() && seps[e] == " " && same(toks[k], toks[e])) ++e;
    return e - k >= 4 && (toks[k].var || !stem(toks[k]).empty()) ? e : k + 1;
  };
  merge_runs(toks, seps, run, [](Token& t) {
    t.var = true;
    t.kind = VarKind::kOther;
  });
}

}  // namespace

// Cuts a line into tokens and separators; returns the tokens, fills seps (normalized: a run of
// whitespace is one space, leading and trailing whitespace dropped).
void tokenize(std::string_view line, size_t base, std::vector<Token>& toks, std::vector<std::string>& seps) {
  toks.clear();
  seps.clear();
  std::string sep;
  size_t i = 0;
  const size_t n = line.size();
  auto flush_sep = [&]() {
    if (seps.empty()) {  // before the first token: no whitespace
      sep.erase(std::remove(sep.begin(), sep.end(), ' '), sep.end());
    }
    seps.push_back(sep);
    sep.clear();
  };
  bool in_quote = false;  // inside a quoted phrase whose words are tokens of their own
  while (i < n) {
    const char c = line[i];
    if (c == '"') {
      size_t close = i + 1;
      while (close < n && line[close] != '"') ++close;
      const bool value = !in_quote && !sep.empty() && sep.back() == '=';  // key="a phrase": one value
      const bool phrase = close < n && line.substr(i + 1, close - i - 1).find(' ') != std::string_view::npos;
      if (in_quote || (phrase && !value)) {  // "GET /a HTTP/1.1": its words are tokens (GET and POST are other messages)
        in_quote = !in_quote;
        sep.push_back(c);
        ++i;
        continue;
      }
    }
    const bool bound =
        (c == '<' || c == '>') && i + 1 < n && is_digit(line[i + 1]) && (i == 0 || is_space(line[i - 1]));
    if (!sep.empty() && sep.back() == '=' && !in_quote && !bound) {
      // a key=value's value is one variable however it is written: to the next space, comma, semicolon or
      // bar outside brackets (ws=WorkSource{10113}, bounds=Rect(0, 0 - 1080, 1920), ids=[1, 2])
      size_t j = i;
      int depth = 0;
      for (; j < n && j < i + 512; ++j) {
        const char ch = line[j];
        if (ch == '(' || ch == '[' || ch == '{') {
          ++depth;
        } else if (ch == ')' || ch == ']' || ch == '}') {
          if (depth == 0) break;
          --depth;
        } else if (depth == 0 && (is_space(ch) || ch == ',' || ch == ';' || ch == '|' || ch == '"' || ch == '<')) {
          break;
        }
      }
      if (depth == 0 && j > i) {
        flush_sep();
        VarKind kind = VarKind::kOther;
        const std::string_view t = line.substr(i, j - i);
        if (!classify_token(t, kind)) kind = VarKind::kOther;
        toks.push_back({static_cast<uint32_t>(base + i), static_cast<uint32_t>(j - i), true, kind});
        i = j;
        continue;
      }
    }
    if (is_delim(c) && !bound) {  // "<1 sec", ">5ms": a bound, part of its number
      if (is_space(c)) {
        if (sep.empty() || sep.back() != ' ') sep.push_back(' ');
      } else {
        sep.push_back(c);
      }
      ++i;
      if (i < n && closes(c, line[i])) {  // an empty "()" "[]" "{}": an empty field, like a filled one
        flush_sep();
        toks.push_back({static_cast<uint32_t>(base + i), 0, true, VarKind::kOther});
      }
      continue;
    }
    size_t j = i;
    if (c == '"' && !in_quote) {  // a quoted value without spaces: to the closing quote (or the end of the line)
      j = i + 1;
      while (j < n && line[j] != '"') ++j;
      j = j < n ? j + 1 : n;
    } else {
      if (bound) ++j;
      int path = -1;  // a path or URL runs to whitespace or a quote, its query (?a=1&b=2;c) included
      auto is_path = [&] {
        if (path < 0)
          path = (c == '/' && j > i + 1) || line.substr(i, j - i).find("://") != std::string_view::npos ? 1 : 0;
        return path == 1;
      };
      for (;;) {
        while (j < n && !is_delim(line[j]) && line[j] != '"') ++j;
        while (j < n && (line[j] == '=' || line[j] == ';' || line[j] == ',') && is_path()) {
          ++j;
          while (j < n && !is_delim(line[j]) && line[j] != '"') ++j;
        }
        const size_t close = j < n && line[j] == '(' ? call_end(line, j) : 0;
        if (close == 0) break;
        j = close;  // name(args) without spaces is one token: LOCAL(0), init(), f(x).g
      }
    }
    flush_sep();
    std::string_view t = line.substr(i, j - i);
    const size_t slash = t.size() >= 3 ? t.find('/') : std::string_view::npos;
    if (slash != std::string_view::npos && slash > 0 && slash + 1 < t.size() &&
        t.find('/', slash + 1) == std::string_view::npos) {
      VarKind k1 = VarKind::kOther, k2 = VarKind::kOther, whole = VarKind::kOther;
      if (classify_token(t.substr(0, slash), k1) && classify_token(t.substr(slash + 1), k2) &&
          !(classify_token(t, whole) && whole == VarKind::kTime)) {
        // two values joined by one '/' (host-7/10.0.0.1:9000, 3/4): a variable each, the '/' constant
        toks.push_back({static_cast<uint32_t>(base + i), static_cast<uint32_t>(slash), true, k1});
        seps.emplace_back("/");
        i += slash + 1;
        t = line.substr(i, j - i);
      }
    }
    const size_t colon = t.size() > 3 && is_alpha(t[0]) ? t.find(':') : std::string_view::npos;
    if (colon != std::string_view::npos && colon >= 2 && colon + 1 < t.size() && t[colon + 1] != '/' &&
        t[colon + 1] != ':' && std::all_of(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(colon),
                                           [](char ch) { return is_alpha(ch) || ch == '_'; })) {
      VarKind k2 = VarKind::kOther;  // Name:value (PendingReds:0, vCores:8): the name constant, the value a variable
      const std::string_view name = t.substr(0, colon), value = t.substr(colon + 1);
      // a lowercase name may be a host (localhost:8080, wpad:80): host and port stay one value, whatever the port
      const bool field = std::any_of(name.begin(), name.end(), [](char ch) { return (ch >= 'A' && ch <= 'Z') || ch == '_'; });
      if (field && classify_token(value, k2)) {
        toks.push_back({static_cast<uint32_t>(base + i), static_cast<uint32_t>(colon), false, VarKind::kOther});
        seps.emplace_back(":");
        i += colon + 1;
        t = line.substr(i, j - i);
      }
    }
    if (t.size() >= 3 && is_digit(t.front()) && is_digit(t.back()) && t.find('_') != std::string_view::npos &&
        std::all_of(t.begin(), t.end(), [](char ch) { return is_digit(ch) || ch == '_'; }) &&
        t.find("__") == std::string_view::npos) {
      size_t a = 0;  // numbers joined by '_' (30546173_4261722401): a number each, the '_' between them constant
      for (size_t u = t.find('_'); u != std::string_view::npos; a = u + 1, u = t.find('_', a)) {
        toks.push_back({static_cast<uint32_t>(base + i + a), static_cast<uint32_t>(u - a), true, VarKind::kNumber});
        seps.emplace_back("_");
      }
      i += a;
      t = line.substr(i, j - i);
    }
    // punctuation of the line, not of the value: a trailing ':' or '.' (10.0.0.1: 11: Bye) and quotes around it
    size_t tail = 0;
    if (t.size() >= 2 && t[0] != '"' && (t.back() == ':' || t.back() == '.') && t[t.size() - 2] != t.back()) tail = 1;
    if (t.size() >= tail + 3 && t.front() == '\'' && t[t.size() - tail - 1] == '\'') {  // 'value'
      seps.back().push_back('\'');
      ++i;
      t.remove_prefix(1);
      ++tail;
    }
    t.remove_suffix(tail);
    j -= tail;
    VarKind kind = VarKind::kOther;
    bool var = classify_token(t, kind);
    if (!var && !seps.back().empty() && seps.back().back() == '=') {  // the value of key=value
      var = true;
      kind = VarKind::kOther;
    }
    if (var && !toks.empty() && toks.back().var && toks.back().kind == kind && seps.back() == "," &&
        (kind == VarKind::kIp || kind == VarKind::kHex || kind == VarKind::kUuid)) {
      // a list of addresses or ids (10.0.0.1,10.0.0.2) is one variable, whatever its length
      seps.pop_back();
      toks.back().len = static_cast<uint32_t>(base + j - toks.back().start);
    } else {
      toks.push_back({static_cast<uint32_t>(base + i), static_cast<uint32_t>(j - i), var, kind});
    }
    i = j;
    for (; tail > 0; --tail) sep.push_back(line[i++]);
  }
  while (!sep.empty() && sep.back() == ' ') sep.pop_back();  // after the last token: none either
  if (seps.empty()) sep.erase(std::remove(sep.begin(), sep.end(), ' '), sep.end());
  seps.push_back(sep);
  fuse_quantities(line, base, toks, seps);
  bool timed = false;
  for (const Token& t : toks) timed = timed || (t.var && t.kind == VarKind::kTime);
  if (timed) fuse_times(toks, seps, line, base);
  if (toks.size() >= 4) fold_lists(toks, seps, line, base);
}

}  // namespace ribbon
