"""The header grammar (worker/digest/header.py: HEADER) matched by PCRE2's JIT in the C++ core, Python's `re` the reference.

    PCRE_PATTERN: HEADER.pattern in PCRE2's syntax (pcre_pattern)
    PATTERNS: the patterns a recipe reads (header_rows.recipe: the grammar, header.TRAILER, STATUS, REQUEST and
              worker/multiline.py's CONTINUATION) in PCRE2's syntax, for the core's _core.HeaderRecipes
    read(keys, firsts, starts) -> per key a tuple: per group list of `firsts` the (start, end) of its first
                                  group that matched text, else None; then per group of `starts` its start
                                  (-1: unset)
    read_re(key, firsts, starts) -> the same tuple, read by HEADER (Python's re)

The core (ext/core/header_match.hpp) matches a line only where every character is ASCII, as bytes: there each
construct of the grammar means what it means in Python's `re` (tests/digest/test_header_jit.py checks the
classes over every ASCII character and the whole grammar span for span over the corpora), with one rewrite:
Python's `\\s` on a str holds the separators \\x1c-\\x1f (str.isspace) and PCRE2's does not, so every `\\s`,
`\\S` and `[^\\S\\n]` is written with them. A line with any other character (or a lone surrogate), and a line
where PCRE2 stops short (a limit of its JIT stack or match count), is read by HEADER: the same spans either way.
Python's `\\Z` (the end of the text) is PCRE2's `\\z`.
Where Unicode is in play the two engines part (PCRE2's \\w holds combining marks, its Unicode tables are
newer, its caseless `i` no dotless ı), so no UTF mode is used.

Why PCRE2 built here: Python's `re` costs several times as much per line on this grammar, RE2 has no
look-around or condition, and PCRE2 as PyPI's `pcre2` wheel and Debian's libpcre2 build it has 2-byte links,
too short for this pattern (CMakeLists.txt builds it with 4).
"""

from __future__ import annotations

import functools
from itertools import compress

from worker import _core
from worker.digest.header import HEADER, REQUEST, STATUS, TRAILER, rewrite
from worker.multiline import CONTINUATION

_ONE_LINE_SPACE = "[^\\S\\n]"      # header._one_line's `\s` outside classes


def _pcre_escape(pair: str, in_class: bool) -> str:
    if pair == "\\s":
        return "\\s\\x1c-\\x1f" if in_class else "[\\s\\x1c-\\x1f]"
    if pair == "\\Z" and not in_class:
        return "\\z"
    if pair == "\\S":
        if in_class:
            raise ValueError("`\\S` inside a class: no PCRE2 spelling of Python's kept")
        return "[^\\s\\x1c-\\x1f]"
    return pair


def pcre_pattern(pattern: str) -> str:
    """`pattern` (Python's syntax, as header.HEADER writes it) with Python's `\\s` on a str spelt out for PCRE2:
    `\\s` also holds \\x1c-\\x1f, `\\S` does not; `\\Z` is `\\z`; the rest of the grammar is written alike in both."""
    # header._one_line's `\s` outside classes: ASCII lines only, so no other space to hold
    return rewrite(pattern, _pcre_escape, {_ONE_LINE_SPACE: "[\\t\\x0b\\x0c\\r\\x1c-\\x1f ]"})


PCRE_PATTERN = pcre_pattern(HEADER.pattern)
PATTERNS = {"header": PCRE_PATTERN, "trailer": pcre_pattern(TRAILER.pattern),
            "status_access": pcre_pattern(STATUS["access"].pattern), "status": pcre_pattern(STATUS[""].pattern),
            "request": pcre_pattern(REQUEST.pattern), "continuation": pcre_pattern(CONTINUATION.pattern)}


@functools.cache
def matcher() -> _core.HeaderMatcher:
    """HEADER compiled by PCRE2 and its JIT (once per process, on first use: a few milliseconds)."""
    return _core.HeaderMatcher(PCRE_PATTERN)


@functools.cache
def _flat(firsts: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The groups of `firsts` in one tuple, and per place in it the list it is of."""
    return tuple(g for groups in firsts for g in groups), tuple(k for k, groups in enumerate(firsts) for _ in groups)


def read_re(key: str, firsts: tuple[tuple[int, ...], ...], starts: tuple[int, ...]) -> tuple:
    """read() of one key by HEADER (Python's re): the reference, and the reading of every line the core leaves.
    One m.group call reads the text of every group (most are unmatched); a span is read only where it is kept."""
    m = HEADER.match(key)
    flat, owner = _flat(firsts)
    texts = m.group(*flat) if len(flat) > 1 else (m.group(*flat),)
    got: list = [None] * len(firsts)
    for i in compress(range(len(flat)), texts):         # the groups that matched text, in order
        if got[owner[i]] is None:
            got[owner[i]] = m.span(flat[i])
    return (*got, *map(m.start, starts))


def read(keys: list[str], firsts: tuple[tuple[int, ...], ...], starts: tuple[int, ...]) -> list[tuple]:
    """Per key a tuple: per group list of `firsts` the (start, end) of its first group that matched text, else
    None; then per group of `starts` its start (-1: unset). One call into the core for all keys; HEADER reads
    those it leaves."""
    got = matcher().read(keys, firsts, starts)
    if None in got:
        for i, g in enumerate(got):
            if g is None:
                got[i] = read_re(keys[i], firsts, starts)
    return got
