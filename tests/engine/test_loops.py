"""The loop finder (worker/engine/loops.py), the one rule the decode loop cuts by and the publish gate
refuses by: the first index of a loop, the suffix look, and the gate's "said twice" extension."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.engine.loops import (LOOP_MAX_UNIT, LOOP_MIN_TOKENS, LOOP_REPEATS, loop_start, loop_starts, loops_at_end,
                                 loops_at_ends)


@pytest.mark.parametrize("ids,start", [
    ([7, 8, 9, 1, 2, 1, 2, 1, 2, 1, 2], 3),         # "1 2" four times from index 3
    ([5, 5, 5, 5, 5, 5, 5, 5], 0),
    ([1, 2, 3, 4, 1, 2, 3, 4], None),               # twice: not yet a loop
    ([1, 2, 3, 1, 2, 3, 1, 2, 3], 0),
    ([4, 6, 6, 6, 9, 9], None),                     # three tokens repeated: under LOOP_MIN_TOKENS
])
def test_loop_start_finds_the_first_token_of_a_loop(ids, start):
    assert loop_start(ids) == start
    assert loops_at_end(ids) == (start is not None)  # every loop here runs to the end
    assert not loops_at_end(ids + [99])


def test_a_unit_said_twice_is_a_loop_only_where_the_caller_says_so():
    sentence = "n2 setup failed on amf - 2 .".split()
    text = ["so", *sentence, *sentence]
    assert loop_start(text) is None  # twice: no loop by the engine's rule
    assert loop_start(text, twice=lambda unit: len(set(unit)) >= 4) == 1
    assert loop_start(text, twice=lambda unit: False) is None
    short = ["a", "b", "c", "d", "e"] * 2  # a unit under six items never counts twice
    assert loop_start(short, twice=lambda unit: True) is None


def test_a_unit_longer_than_the_longest_looked_for_is_no_loop():
    unit = list(range(LOOP_MAX_UNIT + 1))
    assert loop_start(unit * LOOP_REPEATS) is None and not loops_at_end(unit * LOOP_REPEATS)
    assert loop_start(unit[:LOOP_MAX_UNIT] * LOOP_REPEATS) == 0


@given(st.lists(st.integers(0, 3), max_size=40))
def test_the_suffix_look_agrees_with_the_finder(ids):
    """Whatever loops at its end has a loop the finder finds; a loop the finder finds that runs to the
    end (a whole number of units past its start) is what the suffix look sees."""
    if loops_at_end(ids):
        assert loop_start(ids) is not None
    for u in range(1, LOOP_MAX_UNIT + 1):
        r = max(LOOP_REPEATS, -(-LOOP_MIN_TOKENS // u))
        if len(ids) >= r * u and ids[len(ids) - r * u:] == ids[len(ids) - u:] * r:
            assert loops_at_end(ids)


@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=40), st.integers(0, 40)), min_size=1, max_size=6),
       st.integers(0, 3))
def test_the_table_forms_answer_as_the_finder_does_row_by_row(rows, fill):
    """loop_starts / loops_at_ends over a token table (rows of their own lengths, the rest of each row
    filler that is never read) give each row's loop_start / loops_at_end."""
    width = max(max(len(ids) for ids, _ in rows), 1)
    table = np.array([ids + [(fill + k) % 4 for k in range(width - len(ids))] for ids, _ in rows])  # [B, W]
    lengths = np.array([len(ids) for ids, _ in rows])
    starts, ends = loop_starts(table, lengths), loops_at_ends(table, lengths)
    for (ids, _), s, e in zip(rows, starts.tolist(), ends.tolist()):
        want = loop_start(ids)
        assert s == (-1 if want is None else want) and e == loops_at_end(ids)


def test_the_table_forms_on_a_table_too_narrow_for_any_loop():
    table = np.array([[5] * (LOOP_MIN_TOKENS - 1)] * 2)
    assert loop_starts(table, np.array([7, 3])).tolist() == [-1, -1]
    assert loops_at_ends(table, np.array([7, 3])).tolist() == [False, False]
    assert loop_starts(np.zeros((1, 0), dtype=np.int64), np.array([0])).tolist() == [-1]
