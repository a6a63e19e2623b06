"""header_rows.recipe read by the core (ext/core/header_recipe.hpp, _core.HeaderRecipes) against the Python recipe,
the reference: the same tuple for every key of the corpora and of generated documents, the keys the core leaves
(not ASCII) read by the reference; and the patterns a recipe reads besides the grammar (header.TRAILER, STATUS,
REQUEST, worker/multiline.py's CONTINUATION, in PCRE2's syntax: header_jit.PATTERNS) span for span as Python's
`re` at every place a recipe matches them."""

from __future__ import annotations

import random
import re

import pytest

from tests.digest.docgen import OWN_LINES, document
from tests.digest.test_header_branch import _lines
from worker import _core
from worker.digest import header_jit, header_rows
from worker.digest.header import HEADER, REQUEST, STATUS, TRAILER
from worker.multiline import CONTINUATION

# name in PATTERNS: (Python's pattern, searched (else matched at the place))
SMALL = {"trailer": (TRAILER, True), "request": (REQUEST, True), "status_access": (STATUS["access"], False),
         "status": (STATUS[""], False), "continuation": (CONTINUATION, False)}


# lines of our own with a log4j trailer (`%m (%c)`) and near misses, so the trailer is met without the shared corpora
TRAILED = ["2031-02-03 04:05:06,789 INFO  relay started on port 8080 (org.example.relay.Relay)",
           "2031-02-03 04:05:07,120 WARN  [pool-2] backlog 1200 above 1000\t(com.acme.queue.Backlog)",
           "2031-02-03 04:05:08,001 ERROR flush failed (code 17) (org.example.relay.io.Flusher$Task)",
           "2031-02-03 04:05:09,002 INFO  no trailer here (a.b)", "2031-02-03 04:05:10,003 DEBUG (org.x.Y) first",
           "Feb  3 04:05:11 relay-7 java[311]: lease renewed (io.acme.cluster.Elector)",
           "I0203 04:05:12.001122   4411 relay.go:88] reconciled (not.a.Logger)"]


def _alike(keys: list[str]) -> tuple[list[tuple], list[str]]:
    """(the recipes the core read, the keys where it differs from the Python recipe)."""
    got = header_rows._reader().read(keys)
    read = [(k, g) for k, g in zip(keys, got) if g is not None]
    return [g for _, g in read], [k for k, g in read if g != header_rows.recipe(k)]


def test_every_key_and_line_of_the_corpora_gets_the_python_recipe():
    lines = _lines()                     # the labelled unseen formats; the shared logs and formats where present
    keys = list(dict.fromkeys(map(header_rows.shape_key, lines)))
    read, wrong = _alike(keys + lines)   # a line itself too: its digits, its stamp's mask
    assert (len(wrong), wrong[:3]) == (0, [])
    assert len(read) == sum(k.isascii() for k in keys + lines) and len(lines) > 160
    # what the recipe derives, each met: every shape, a status, a body, a trailer, a leading column, a continuation
    assert {r[9] for r in read} >= {"", "rfc3164", "timestamped", "level_first", "access"}
    assert any(r[11] >= 0 for r in read) and any(r[12] is not None for r in read) and any(r[10] for r in read)
    assert any(len(r[7]) > 1 for r in read) and any(r[5] for r in read)


def test_every_key_of_generated_documents_gets_the_python_recipe_or_is_left_to_it():
    lines = []
    for seed in range(100):
        lines += document(random.Random(seed), OWN_LINES, most=2000).split("\n")
    keys = list(dict.fromkeys(map(header_rows.shape_key, lines)))
    read, wrong = _alike(keys)
    assert (len(wrong), wrong[:3]) == (0, [])
    assert len(read) == sum(k.isascii() for k in keys) < len(keys)           # what is not ASCII is the reference's
    assert {r[9] for r in read} >= {"rfc5424", "rfc3164", "timestamped", "level_first", "access"}


def test_a_key_not_ascii_is_read_by_the_reference():
    keys = ["0000-00-00 00:00:00 hôst app[0]: x", "ERROR \ud800 lone surrogate", "WARN ok (org.acme.x.Y)"]
    assert header_rows._reader().read(keys)[:2] == [None, None]
    assert header_rows.recipes(keys) == [header_rows.recipe(k) for k in keys]


def _places(line: str) -> set[int]:
    """Where a recipe matches a small pattern in `line`: its start, its message, each quote after it, a request."""
    at = HEADER.match(line).start("msg")
    places = {0, max(at, 0)} | {i for i, c in enumerate(line) if c == '"' and i >= at}
    request = REQUEST.search(line, max(at, 0))
    return places | ({request.start()} if request else set())


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_small_pattern_matches_as_pythons_re_at_every_place_a_recipe_reads(name):
    python, searched = SMALL[name]
    assert python.flags == re.UNICODE      # no re.M, no re.I: what the core compiles them as
    core = _core.HeaderMatcher(header_jit.PATTERNS[name], anchored=not searched, multiline=False)
    find = python.search if searched else python.match
    lines = [ln for ln in _lines() + TRAILED if ln.isascii()]
    lines += list(dict.fromkeys(header_rows.shape_key(ln) for ln in lines))
    wrong, found = [], 0
    for ln in lines:
        for pos in _places(ln):
            m = find(ln, pos)
            found += m is not None
            if core.spans(ln, pos) != (m.regs if m else None):
                wrong.append((ln, pos))
    assert (len(wrong), wrong[:3]) == (0, [])
    assert found > 5 and len(lines) > 300


def test_pythons_end_of_text_is_pcre2s():
    """`\\Z` is the end of the text in Python's re, before a last LF as well in PCRE2's: pcre_pattern writes `\\z`."""
    assert header_jit.pcre_pattern(r"a\Z|[\s]") == r"a\z|[\s\x1c-\x1f]"
    line = "x (org.acme.Y)\n"
    assert TRAILER.search(line) is None
    assert _core.HeaderMatcher(header_jit.PATTERNS["trailer"], anchored=False, multiline=False).spans(line) is None
    assert _core.HeaderMatcher(TRAILER.pattern, anchored=False, multiline=False).spans(line) is not None
    assert _core.HeaderMatcher(header_jit.PATTERNS["trailer"], anchored=False).spans(line[:-1]) == ((1, 14),)


def test_a_refused_pattern_set_is_a_value_error():
    with pytest.raises(ValueError, match="no pattern trailer"):
        _core.HeaderRecipes({"header": "x"}, header_rows._FIRSTS, header_rows._STARTS, header_rows._level)
    with pytest.raises(ValueError, match="10 group lists"):
        _core.HeaderRecipes(header_jit.PATTERNS, header_rows._FIRSTS[:3], header_rows._STARTS, header_rows._level)
    with pytest.raises(ValueError, match="no group 9999"):
        _core.HeaderRecipes(header_jit.PATTERNS, ((9999,), *header_rows._FIRSTS[1:]), header_rows._STARTS,
                            header_rows._level)


def test_recipes_share_their_spans_pieces_and_masks():
    """The core makes one tuple per span and one str per stamp mask (fewer objects kept); equal either way."""
    reader = _core.HeaderRecipes(header_jit.PATTERNS, header_rows._FIRSTS, header_rows._STARTS, header_rows._level)
    a, b = reader.read(["0000-00-00 00:00:00 INFO a", "0000-00-00 00:00:00 INFO bb (org.acme.x.Y)"])
    assert a[0] is b[0] and a[4] is b[4] and a[14] is b[14] and a[7] is not b[7]
    assert a[7] is reader.read(["0000-00-00 00:00:00 INFO c"])[0][7]
    assert [a, b] == list(map(header_rows.recipe, ["0000-00-00 00:00:00 INFO a",
                                                   "0000-00-00 00:00:00 INFO bb (org.acme.x.Y)"]))


def test_a_read_begun_inside_another_leaves_its_keys_to_the_caller():
    """The level table is Python: another thread may call read() while a read waits on it (here: the table itself
    does). That read returns None for every key (the caller's reference reads them); the first is unharmed."""
    inner = []

    def level_of(token: str) -> str | None:
        inner.append(reader.read(["0000-00-00 00:00:00 WARN x"]))
        return header_rows._level(token)

    reader = _core.HeaderRecipes(header_jit.PATTERNS, header_rows._FIRSTS, header_rows._STARTS, level_of)
    key = "0000-00-00 00:00:00 INFO a (org.acme.x.Y)"
    assert reader.read([key]) == [header_rows.recipe(key)] and inner == [[None]]
    assert reader.read(["0000-00-00 00:00:00 x"])[0] is not None       # done: reads again
