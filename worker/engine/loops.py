"""The loop finder: where a run of items repeated back to back starts (Python and numpy, no torch).

    loop_start(items, twice=None) -> int | None   the index where the first loop starts, or None
    loops_at_end(items) -> bool                   whether the items end in a loop (a suffix look)
    loop_starts(table, lengths) -> int64 [B]      loop_start of every row of a token table (-1: none)
    loops_at_ends(table, lengths) -> bool [B]     loops_at_end of every row of a token table

A loop is a unit of one to LOOP_MAX_UNIT items repeated back to back LOOP_REPEATS times or more,
LOOP_MIN_TOKENS items or more in all. `twice`, when given, also counts a unit of TWICE_MIN_UNIT
items or more said twice, when `twice(unit)` holds (the publish gate's "a sentence said twice").

Items are anything comparable: the decode loop passes token ids (worker/engine/engine.py, which cuts
a looping output where its loop starts), the publish gate the words, numbers and punctuation of a
model's text (worker/pipeline/gate.py). One rule for both: what the engine cuts, the gate refuses.

The table forms answer the same questions for every row of a token table at once (int [B, W], row b's
items its first lengths[b] entries, the rest never read): the decode loop's look over a round's rows
and its finished documents. A loop of unit u needs R(u) = max(LOOP_REPEATS, ceil(LOOP_MIN_TOKENS / u))
units, that is a window of R(u) * u items where each item equals the one u later; one cumulative count
of mismatches per unit size answers every window of every row, so a look costs
LOOP_MAX_UNIT array passes over the table, not a Python loop per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

LOOP_MAX_UNIT = 16
LOOP_REPEATS = 3
LOOP_MIN_TOKENS = 8
TWICE_MIN_UNIT = 6


def loop_start(items: Sequence, twice: Callable[[Sequence], bool] | None = None) -> int | None:
    """The index where a loop of `items` starts (see the module docstring), or None."""
    n = len(items)
    for i in range(n - LOOP_MIN_TOKENS + 1):
        for u in range(1, min(LOOP_MAX_UNIT, (n - i) // 2) + 1):
            unit = items[i: i + u]
            r = 1
            while items[i + r * u: i + (r + 1) * u] == unit:
                r += 1
            if r >= LOOP_REPEATS and r * u >= LOOP_MIN_TOKENS:
                return i
            if twice is not None and r >= 2 and u >= TWICE_MIN_UNIT and twice(unit):
                return i
    return None


def loops_at_end(items: Sequence) -> bool:
    """Whether `items` end in a loop (the suffix alone: a few comparisons, for the decode loop's looks)."""
    n = len(items)
    for u in range(1, LOOP_MAX_UNIT + 1):
        r = max(LOOP_REPEATS, -(-LOOP_MIN_TOKENS // u))  # repeats needed of a unit of u items
        if n < r * u:
            return False
        unit = items[n - u:]
        if all(items[n - (k + 1) * u: n - k * u] == unit for k in range(1, r)):
            return True
    return False


def _units(width: int) -> list[tuple[int, int]]:
    """(u, R(u)) for every unit size whose loop fits in `width` items (R(u) * u grows with u)."""
    units = ((u, max(LOOP_REPEATS, -(-LOOP_MIN_TOKENS // u))) for u in range(1, LOOP_MAX_UNIT + 1))
    return [(u, r) for u, r in units if r * u <= width]


def _misses(table: np.ndarray, u: int) -> np.ndarray:
    """int32 [B, W - u + 1]: [:, k] counts the j < k where table[:, j] != table[:, j + u]."""
    out = np.zeros((table.shape[0], table.shape[1] - u + 1), dtype=np.int32)
    np.cumsum(table[:, :-u] != table[:, u:], axis=1, out=out[:, 1:])
    return out


def loop_starts(table: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 [B]: loop_start(table[b, :lengths[b]]) for every row b (twice=None), -1 where none."""
    table, lengths = np.asarray(table), np.asarray(lengths, dtype=np.int64)  # [B, W], [B]
    b, width = table.shape
    first = np.full(b, width, dtype=np.int64)  # width: no loop yet
    for u, r in _units(width):
        miss = _misses(table, u)  # [B, W - u + 1]
        i = np.arange(width - r * u + 1)  # [S]: where a loop of r units may start
        ok = (miss[:, i + (r - 1) * u] == miss[:, i]) & (i[None, :] + r * u <= lengths[:, None])  # [B, S]
        np.minimum(first, np.where(ok.any(axis=1), ok.argmax(axis=1), width), out=first)
    return np.where(first < width, first, -1)


def loops_at_ends(table: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """bool [B]: loops_at_end(table[b, :lengths[b]]) for every row b (each row's last items, aligned)."""
    table, lengths = np.asarray(table), np.asarray(lengths, dtype=np.int64)  # [B, W], [B]
    units = _units(table.shape[1])
    hit = np.zeros(table.shape[0], dtype=bool)
    if not units:
        return hit
    span = max(r * u for u, r in units)
    idx = lengths[:, None] - span + np.arange(span)  # [B, span]: tail[:, k] is item n - span + k
    tail = np.take_along_axis(table, np.clip(idx, 0, None), 1)  # clipped entries lie outside every window read
    for u, r in units:
        a = span - r * u  # the window: the last r * u items
        hit |= (lengths >= r * u) & (tail[:, a: span - u] == tail[:, a + u:]).all(axis=1)
    return hit
