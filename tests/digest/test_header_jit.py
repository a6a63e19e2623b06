"""The header grammar on PCRE2's JIT (worker/digest/header_jit.py, ext/core/header_match.hpp) against Python's `re`,
the reference: every group of every line at the same span, the classes alike over every ASCII character, the
lines PCRE2 is not given (not ASCII) read by `re`."""

from __future__ import annotations

import random
import string

import pytest

from tests.digest.docgen import OWN_LINES, document
from tests.digest.test_header_branch import _lines
from worker import _core
from worker.digest import header_jit, header_rows
from worker.digest.header import HEADER

ALL = tuple((g,) for g in range(HEADER.groups + 1))    # every group: its span where it matched text
STARTS = tuple(range(HEADER.groups + 1))               # and its start (-1: unset): with it, the whole of m.regs


def _regs_alike(lines: list[str]) -> tuple[int, list[str]]:
    """(lines the core read, lines where it differs from HEADER in any group)."""
    got = header_jit.matcher().read(lines, ALL, STARTS)
    read = [(ln, g) for ln, g in zip(lines, got) if g is not None]
    return len(read), [ln for ln, g in read if g != header_jit.read_re(ln, ALL, STARTS)]


def test_every_line_of_the_corpora_matches_as_pythons_re_group_for_group():
    lines = _lines()                    # the labelled unseen formats; the shared logs and formats where present
    keys = list(dict.fromkeys(map(header_rows.shape_key, lines)))
    read, wrong = _regs_alike(lines + keys)
    assert (len(wrong), wrong[:3]) == (0, [])
    assert read > 300 and len(lines) > 160


def test_every_line_of_generated_documents_matches_as_pythons_re_or_is_left_to_it():
    lines = []
    for seed in range(150):
        lines += document(random.Random(seed), OWN_LINES, most=2000).split("\n")
    lines = list(dict.fromkeys(lines))
    read, wrong = _regs_alike(lines)
    assert (len(wrong), wrong[:3]) == (0, [])
    assert read == sum(ln.isascii() for ln in lines) and read < len(lines)   # what is not ASCII is re's


@pytest.mark.parametrize("line", [
    "2023-01-12 10:01:22\x1chost app[1]: x", "2023-01-12\x1d10:01:22 ERROR x", "ERROR\x1cdisk full",
    "Jan 12 10:01:22 host\x1fsshd[1]: error: x", "2023-01-12 10:01:22 INFO\x1e[main] a.b.C: x",
])
def test_a_separator_pythons_re_counts_as_space_reads_alike(line):
    """\\x1c-\\x1f are `\\s` to Python's re on a str, not to PCRE2: pcre_pattern spells them out."""
    want = header_jit.read_re(line, ALL, STARTS)
    assert header_jit.matcher().read([line], ALL, STARTS) == [want]
    assert _core.HeaderMatcher(HEADER.pattern).read([line], ALL, STARTS) != [want]     # the pattern as re writes it


CLASSES = [r"\s", r"\S", r"[^\S\n]", r"\w", r"\d", r".", r"[^\s\[]", r"[\w.-]", r"[^\][\s]", r"\S++"]


@pytest.mark.parametrize("pattern", CLASSES + [f"(?i:{c})" for c in string.ascii_letters])
def test_a_class_holds_the_same_ascii_characters_as_in_pythons_re(pattern):
    import re  # noqa: PLC0415

    m = _core.HeaderMatcher(header_jit.pcre_pattern(pattern) + "$")
    chars = [chr(c) for c in range(128)]
    core = [g is not None for g in m.read(chars, ((0,),), ())]
    assert core == [re.fullmatch(pattern, c) is not None for c in chars]


def test_a_line_not_ascii_is_left_to_pythons_re():
    lines = ["2023-01-12 10:01:22 hôst app[1]: x", "ERROR \ud800 lone surrogate", "\u2028INFO x", "WARN ok"]
    assert header_jit.matcher().read(lines, ALL, STARTS)[:3] == [None, None, None]
    assert header_jit.read(lines, ALL, STARTS) == [header_jit.read_re(ln, ALL, STARTS) for ln in lines]


def test_pcre_pattern_spells_pythons_space_and_nothing_else():
    assert header_jit.pcre_pattern(r"a\s[\s,]\S[^\S\n]\d\w[\]\s]") == (
        r"a[\s\x1c-\x1f][\s\x1c-\x1f,][^\s\x1c-\x1f][\t\x0b\x0c\r\x1c-\x1f ]\d\w[\]\s\x1c-\x1f]")
    with pytest.raises(ValueError, match="inside a class"):
        header_jit.pcre_pattern(r"[\S,]")


def test_a_refused_pattern_or_group_is_a_value_error():
    with pytest.raises(ValueError, match="missing closing parenthesis"):
        _core.HeaderMatcher("(unclosed")
    with pytest.raises(ValueError, match="no group 99"):
        header_jit.matcher().read(["x"], ((99,),), ())
    assert header_jit.matcher().groups == HEADER.groups
    assert header_jit.matcher().group_number("msg") == HEADER.groupindex["msg"]
