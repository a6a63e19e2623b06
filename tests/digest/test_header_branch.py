"""The header grammar's optional groups written as alternations with an empty branch (worker/digest/header.py:
_optional_as_branch) and its possessive runs: the same pattern language, so every line matches group for group as
the grammar written plainly (every optional group `(...)?`, every run greedy)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from worker.digest import header

HERE = Path(__file__).parent
SHARED = Path(__file__).resolve().parents[3] / "shared"     # the development logs and formats (read, not copied)


def _greedy(pattern: str) -> str:
    """`pattern` with every possessive quantifier (`++`, `*+`, `?+`, `{m,n}+`) written greedy."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        step = 2 if c == "\\" else 1
        if c != "\\" and in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            step = 2 if pattern[i + 1:i + 2] == "]" else 3 if pattern[i + 1:i + 3] == "^]" else 1
        elif c == "+" and out and out[-1] in ("+", "*", "?", "}"):      # a quantifier's possessive `+`
            i += 1
            continue
        out.append(pattern[i:i + step])
        i += step
    return "".join(out)


WRITTEN = re.compile(header._one_line(header._compact(header._GRAMMAR)), re.M)   # the grammar as written
PLAIN = re.compile(_greedy(WRITTEN.pattern), re.M)                               # and with every run greedy


@pytest.mark.parametrize(("pattern", "rewritten"), [
    (r"(?:ab)?c", r"(?:ab|)c"),
    (r"(?:ab)??c", r"(?:|ab)c"),
    (r"(?P<x>a|b)?", r"(?:(?P<x>a|b)|)"),
    (r"(?=a)?", r"(?:(?=a)|)"),
    (r"(?:a)?+b", r"(?:a)?+b"),                                   # possessive: as written
    (r"a?(?:b){0,1}", r"a?(?:b){0,1}"),                           # a character's `?`, a counted repeat: as written
    (r"[)]?(?:\)x)?[^]()]", r"[)]?(?:\)x|)[^]()]"),               # parentheses in classes and escaped
    (r"(?P<t>a)?(?(t)b|c)?", r"(?:(?P<t>a)|)(?:(?(t)b|c)|)"),     # a condition's group reference is no group
    (r"(?:(?:a)?b)?", r"(?:(?:a|)b|)"),                           # nested
])
def test_an_optional_group_becomes_an_alternation_with_an_empty_branch(pattern, rewritten):
    assert header._optional_as_branch(pattern) == rewritten
    for text in ("", "a", "ab", "abc", "c", "b", ")x]", "bc", "x"):
        a, b = re.match(pattern, text), re.match(rewritten, text)
        assert (a and a.regs) == (b and b.regs), text


def _lines() -> list[str]:
    lines = []
    for name in ("unseen_formats.jsonl", "unseen_formats_check.jsonl"):
        lines += [json.loads(r)["line"] for r in (HERE / name).read_text(encoding="utf-8").splitlines() if r.strip()]
    for f in sorted((SHARED / "devlogs").glob("loghub/*/*_2k.log")):
        lines += f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n")
    formats = SHARED / "formats" / "formats.jsonl"
    if formats.exists():
        lines += [json.loads(r)["line"] for r in formats.read_text(encoding="utf-8").splitlines() if r.strip()]
    return list(dict.fromkeys(lines))


def test_possessive_quantifiers_are_written_greedy_and_nothing_else_changes():
    assert _greedy(r"\S++\s+a*+b?+c{1,80}+\++[+]+(?:x)+") == r"\S+\s+a*b?c{1,80}\++[+]+(?:x)+"
    assert "++" in WRITTEN.pattern and "++" not in PLAIN.pattern


def test_every_line_matches_as_the_grammar_written_plainly_group_for_group():
    lines = _lines()
    wrong = [ln for ln in lines if not header.HEADER.match(ln).regs == WRITTEN.match(ln).regs == PLAIN.match(ln).regs]
    assert (len(wrong), wrong[:3]) == (0, [])
    assert len(lines) > 160                   # the labelled unseen formats at least
    assert header.HEADER.pattern != WRITTEN.pattern and header.HEADER.groupindex == PLAIN.groupindex


def _unguarded(pattern: str) -> str:
    """`pattern` without the look-aheads that only skip work (header._SKIP_*)."""
    for guard in (header._SKIP_COLON_LOGGER, header._SKIP_DASH_LOGGER, header._SKIP_CTX):
        written = header._one_line(guard)
        assert written in pattern, guard
        pattern = pattern.replace(written, "")
    return pattern


UNGUARDED = re.compile(_unguarded(WRITTEN.pattern), re.M)

# loggers and contexts around what each guard tests: `::` pairs, `$` on either side of a separator, a pid in
# brackets, space before the colon, a logger that is no logger (a bracket, a single colon inside, no colon)
GUARDED = [
    "2026-03-02 10:00:00,117 INFO [main] org.apache.x.App: started",
    "2026-03-02 10:00:00,117 INFO a::b::c: started", "2026-03-02 10:00:00,117 INFO a::b - started",
    "2026-03-02 10:00:00,117 WARN Foo$Bar: x", "2026-03-02 10:00:00,117 WARN Foo$Bar.baz$1: x",
    "2026-03-02 10:00:00,117 ERROR o.a.Svc  : x", "2026-03-02 10:00:00,117 ERROR a.B#run: x",
    "2026-03-02 10:00:00,117 ERROR org.x.Y[12]: x", "2026-03-02 10:00:00,117 ERROR org.x.Y[ab]: x",
    "2026-03-02 10:00:00,117 DEBUG a.b:c.d: x", "2026-03-02 10:00:00,117 DEBUG a.b:::c: x",
    "2026-03-02 10:00:00,117 DEBUG a.b.c [x] y", "2026-03-02 10:00:00,117 INFO File.java:240 - x",
    "2026-03-02 10:00:00,117 INFO MyApp - x", "2026-03-02 10:00:00,117 INFO My:App - x",
    "2026-03-02 10:00:00,117 INFO a.b.c -x", "2026-03-02 10:00:00,117 INFO a.b.c\t-\tx",
    "2026-03-02 10:00:00 host-1 worker 7 ctx> ERR: x", "2026-03-02 10:00:00 a b c d e f g ABCD: x",
    "2026-03-02 10:00:00 a:b ABC:x ABC: y", "2026-03-02 10:00:00 a b c abc: x", "2026-03-02 10:00:00 x AB: y",
    "[01.02 10:00:00] app.exe - host.example.org:443 open through proxy",
]


def test_the_guards_change_no_match():
    lines = GUARDED + _lines()
    wrong = [ln for ln in lines if header.HEADER.match(ln).regs != UNGUARDED.match(ln).regs]
    assert (len(wrong), wrong[:3]) == (0, [])
    assert UNGUARDED.pattern != WRITTEN.pattern and UNGUARDED.groupindex == WRITTEN.groupindex
