"""Levels per line and the failures of a document, ranked.

A line's level, first found wins:
1. its header's level (formats.py: syslog PRI, klog letter, `[ERRO]`, `level=warn`, JSON `severity`...);
2. its template's level word (levels.level_of_pattern: `ERROR` among the first tokens, `[warn]`,
   `level=error` values, `error:` opening the message);
3. a failure keyword that is the subject of the message (`failed`, `error`, `exception`, `timeout`...
   as a word of the template's constant text), never a parameter name (`fail_on_disconnect=true`,
   `timeout=30`), a value, or a negated word (`no errors`, `0 failures`): ERROR, or WARN for the
   softer words;
4. a continuation line (multiline.continues: a stack frame, an indented line, `Caused by:`, `... N more`,
   a Go panic's frames) with no level of its own takes the level of the line before it: it counts in
   that level, but is no failure entry of its own. Any other line without a level of its own has none
   (counted as such), never the level of the line before it.
An authentication failure (`Failed password`, `authentication failure`, `invalid user`...) is at least
WARN whatever its header says (daemons log them at info).
A failure is a line of level WARN or worse. Failures are grouped by template and ranked by incident
weight, heaviest first (incident_weight: how many lines, their level, how new the template is in the
document), then time (earliest first, the line number where there is none), so a burst of one failure is
never crowded out by one-line failures of its level.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np

from worker.digest.levels import LEVEL_KEYS, letter_runs, level_of_pattern, level_of_value
from worker.messages.levels import ORDER, RANK, WARN_RANK, level_word
from worker.multiline import continues

HARD = frozenset({"error", "errors", "failed", "failure", "failures", "fail", "fails", "exception", "refused",
                  "denied", "unreachable", "aborted", "abort", "rejected", "reject", "fatal", "panic", "segfault",
                  "crashed", "crash", "corrupted", "corrupt", "overflow", "unable", "cannot", "couldn't",
                  "can't", "invalid", "illegal", "killed", "oom"})
SOFT = frozenset({"timeout", "timed", "warning", "lost", "retrying", "retry", "dropped", "degraded", "expired",
                  "mismatch", "unexpected", "broken", "down"})
_NEGATION = frozenset({"no", "not", "0", "without", "zero", "none", "never", "non"})
_WORD = re.compile(r"(?<![\w=./\-])([A-Za-z][A-Za-z']*)(?![\w=\-]|\.\w)")
_RANK_OR_NONE = {**RANK, None: -1}
AUTH_FAILURE = re.compile(r"(?i)\b(?:failed (?:password|publickey|keyboard-interactive|login|none|su)\b"
                          r"|authentication fail|auth(?:entication)? failure|invalid user\b|illegal user\b"
                          r"|login incorrect|bad password|failed to authenticate|(?:access|permission) denied)")
_AUTH_WORDS = ("fail", "invalid user", "illegal user", "login incorrect", "bad password", " denied")  # one is in
# every text AUTH_FAILURE matches, as lower-case ASCII: a text holding none of them needs no search
_PREFIX = re.compile(r"^\s*[\[<(]?([A-Za-z]{3,11})[\]>)]?:")


# a failure word's letters up to its first `'`: a whole run of ASCII letters (levels.letter_runs) of any text
# where _WORD finds the word (_WORD's word is ASCII letters and `'`, with no letter on either side)
_KEY_RUNS = frozenset(w.split("'")[0].encode() for w in HARD | SOFT)


@functools.lru_cache(maxsize=8192)  # patterns repeat across the documents of a stream
def keyword_level(pattern: str) -> str | None:
    """ERROR or WARN when a failure word is the subject of a template's constant text, else None (a pattern
    without a run of _KEY_RUNS has no failure word; the rest are read word by word, words_level)."""
    if _KEY_RUNS.isdisjoint(letter_runs(pattern)):
        return None
    return words_level(pattern)


def words_level(pattern: str) -> str | None:
    """keyword_level read word by word (its definition)."""
    words = _WORD.findall(pattern)
    worst = None
    for i, w in enumerate(words):
        lw = w.lower()
        if lw in HARD or lw in SOFT:
            if i > 0 and words[i - 1].lower() in _NEGATION:
                continue
            if _followed_by_value(pattern, w):
                continue
            if lw in HARD:
                return "ERROR"
            worst = "WARN"
    return worst


def _followed_by_value(pattern: str, word: str) -> bool:
    """`timeout=30`, `timeout: 30`, `error_count`: the word names a parameter."""
    at = pattern.find(word)
    rest = pattern[at + len(word):at + len(word) + 6]
    return rest.startswith(("=", ":<n>", ": <n>", "_"))


def template_level(pattern: str, t) -> str | None:
    """The level a template's own text gives (rule 3), or None."""
    level = level_of_pattern(pattern)
    if level is not None:
        return level
    m = _PREFIX.match(pattern)
    if m:
        level = level_word(m.group(1)) if len(m.group(1)) > 2 else None
        if level is not None:
            return level
    for v in t.vars:
        if v.key.lower() in LEVEL_KEYS and v.top:
            return level_of_value(v.top[0][0])
    return None


def _distinct(ids: np.ndarray) -> list[int]:
    """The distinct template ids among `ids` (none negative), ascending: np.unique's answer, counted instead
    of sorted (np.unique imports numpy.ma on its first call, about 16 ms of the first document a process reads)."""
    return np.flatnonzero(np.bincount(ids)).tolist()


def line_ranks(tm, levels: list[str | None], continued: list[bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """([L] int8 level rank of each line, -1 none; [L] bool the line's rank is inherited from its record's
    first line (a continuation: counted in its record's level, never a failure entry of its own))."""
    n = len(tm.lines)
    ranks = np.fromiter(map(_RANK_OR_NONE.__getitem__, levels), dtype=np.int8, count=n)          # [L]
    inherited = np.zeros(n, dtype=bool)                                                          # [L]
    todo = _distinct(tm.line_template[(ranks < 0) & (tm.line_template >= 0)])
    if todo:
        t_rank = np.full(len(tm.templates), -1, dtype=np.int8)                                    # [K]
        for k in todo:
            t = tm.templates[k]
            level = template_level(t.pattern, t)
            if level is None:
                level = keyword_level(t.pattern)
            if level is not None:
                t_rank[k] = RANK[level]
        fill = (ranks < 0) & (tm.line_template >= 0)
        ranks[fill] = t_rank[tm.line_template[fill]]
    auth = [t.index for t in tm.templates if _authenticates(t.pattern)]
    if auth:
        hit = np.isin(tm.line_template, auth)                                                  # [L]
        ranks[hit & ((ranks < 0) | (ranks > WARN_RANK))] = WARN_RANK
    if (ranks >= 0).any():
        # continuations (multiline rules, of no level of their own) take the level before them
        cont = (ranks < 0) & (tm.line_template >= 0)
        if continued is None:
            cont[cont] = [continues(tm.lines[i]) for i in np.flatnonzero(cont).tolist()]
        else:
            cont &= np.fromiter(continued, dtype=bool, count=n)
        if cont.any():
            # [L] the record's first line at or before; a blank line (no template) neither starts a record
            # nor ends one (a Go panic's frames follow a blank line)
            idx = np.where(cont | (tm.line_template < 0), -1, np.arange(n))
            np.maximum.accumulate(idx, out=idx)
            inherited = cont & (idx >= 0)
            ranks[inherited] = ranks[idx[inherited]]
            inherited &= ranks >= 0
    return ranks, inherited


@functools.lru_cache(maxsize=8192)  # patterns repeat across the documents of a stream
def _authenticates(pattern: str) -> bool:
    """Whether a template is an authentication failure (AUTH_FAILURE), after a look for the words every such
    text holds (ASCII text: `(?i)` also folds a few non-ASCII letters)."""
    if pattern.isascii():
        low = pattern.lower()
        for w in _AUTH_WORDS:   # a loop: any() over a generator costs twice as much
            if w in low:
                break
        else:
            return False
    return AUTH_FAILURE.search(pattern) is not None


def severity_counts(ranks: np.ndarray) -> dict[str, int]:
    counts = np.bincount(ranks[ranks >= 0].astype(np.int64), minlength=len(ORDER))
    return {ORDER[i]: int(c) for i, c in enumerate(counts) if c}


def ranked_failures(tm, ranks: np.ndarray, keys: list[str], inherited: np.ndarray | None = None) -> list[dict]:
    """One entry per template with failure lines, best first: level, template, lines, first/last (0-based)."""
    own = (ranks >= 0) & (ranks <= WARN_RANK) & (tm.line_template >= 0)
    bad = np.flatnonzero(own if inherited is None else own & ~inherited)
    if not len(bad):
        return []
    tmpl = tm.line_template[bad]
    out = []
    for k in _distinct(tmpl):
        rows = bad[tmpl == k]
        worst = int(ranks[rows].min())
        timed = [(keys[j], j) for j in rows.tolist() if keys and keys[j]] if keys else []
        first_t = min(timed)[1] if timed else None
        last_t = max(timed)[1] if timed else None
        out.append({"template": k, "level": ORDER[worst], "rank": worst, "lines": rows, "count": len(rows),
                    "first_line": int(rows[0]), "last_line": int(rows[-1]),
                    "first_timed": first_t, "last_timed": last_t,
                    "sort_time": keys[first_t] if first_t is not None else ""})
    for f in out:
        f["weight"] = incident_weight(f["count"], f["rank"], tm.templates[f["template"]].count)
    out.sort(key=lambda f: (-f["weight"], f["sort_time"], f["first_line"]))
    return out


LEVEL_FACTOR = 4.0   # one level worse weighs as much as 4x the lines' log-count


def incident_weight(lines: int, rank: int, template_lines: int) -> float:
    """lines x level x novelty: (1 + log2 lines) x LEVEL_FACTOR^(levels above WARN) x (0.5 + 0.5 x the share of
    the template's lines that fail). A burst of 30 FATAL lines outweighs one FATAL line (5.9 to 1), a single
    FATAL line outweighs 1,000 WARN lines (64 to 11), and a template whose every line fails is weighed whole,
    one that mostly logs at a normal level half."""
    novelty = 0.5 + 0.5 * lines / max(1, template_lines)
    return (1.0 + math.log2(max(1, lines))) * LEVEL_FACTOR ** (WARN_RANK - rank) * novelty
