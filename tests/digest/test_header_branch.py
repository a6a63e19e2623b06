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
