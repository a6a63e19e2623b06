"""The loop finder: where a run of items repeated back to back starts (pure Python, no torch).

    loop_start(items, twice=None) -> int | None   the index where the first loop starts, or None
    loops_at_end(items) -> bool                   whether the items end in a loop (a suffix look)

A loop is a unit of one to LOOP_MAX_UNIT items repeated back to back LOOP_REPEATS times or more,
LOOP_MIN_TOKENS items or more in all. `twice`, when given, also counts a unit of TWICE_MIN_UNIT
items or more said twice, when `twice(unit)` holds (the publish gate's "a sentence said twice").

Items are anything comparable: the decode loop passes token ids (worker/engine/engine.py, which cuts
a looping output where its loop starts), the publish gate the words, numbers and punctuation of a
model's text (worker/pipeline/gate.py). One rule for both: what the engine cuts, the gate refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
