"""A straightforward pure-Python packer: the reference for tests and the speed baseline.

Same rule as the C++ selection (ext/core/pending_set.hpp), one bin at a time:
the oldest pending sequence first, then repeatedly the largest one that still
fits (the oldest among equals). Taking sizes in decreasing order and keeping
each that fits is First-Fit-Decreasing for the bin being filled.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence


def pack_reference(
    lengths: Sequence[int], budget: int, reserve_per_seq: int = 0, max_seqs: int = 256
) -> list[list[int]]:
    """Packs all sequences (indices into lengths, arrival order); returns bins of indices."""
    buckets: dict[int, deque[int]] = {}  # weight -> indices in arrival order
    for i, n in enumerate(lengths):
        w = n + reserve_per_seq
        if n <= 0 or w > budget:
            raise ValueError(f"sequence {i} has {n} tokens; weight {w} exceeds the budget {budget}")
        buckets.setdefault(w, deque()).append(i)
    sizes = sorted(buckets)  # distinct weights present, ascending
    alive = [True] * len(lengths)
    oldest = 0
    bins: list[list[int]] = []
    left = len(lengths)

    def take(i: int) -> None:
        nonlocal left
        alive[i] = False
        left -= 1

    while left:
        while not alive[oldest]:
            oldest += 1
        first = oldest
        w0 = lengths[first] + reserve_per_seq
        bucket = buckets[w0]
        bucket.remove(first) if bucket[0] != first else bucket.popleft()
        if not bucket:
            del buckets[w0]
            sizes.pop(bisect.bisect_left(sizes, w0))
        take(first)
        current, room = [first], budget - w0
        while len(current) < max_seqs:
            k = bisect.bisect_right(sizes, room) - 1
            if k < 0:
                break
            w = sizes[k]
            bucket = buckets[w]
            i = bucket.popleft()
            if not bucket:
                del buckets[w]
                sizes.pop(k)
            take(i)
            current.append(i)
            room -= w
        bins.append(current)
    return bins


def lower_bound_bins(lengths: Sequence[int], budget: int, reserve_per_seq: int = 0) -> int:
    """ceil(total weight / budget): no packing can use fewer bins."""
    total = sum(lengths) + reserve_per_seq * len(lengths)
    return -(-total // budget)


def pack_stream_reference(
    lengths: Sequence[int], budget: int, reserve_per_seq: int, max_seqs: int, window: int
) -> list[list[int]]:
    """Straightforward streaming FFD, as the packer runs: sequences arrive in order
    until the pending weight reaches ``window``, then one bin is formed (the oldest
    first, then the rest by decreasing weight, oldest among equals, each one kept
    if it fits), and so on. Returns bins of indices into lengths.
    """
    pending: list[tuple[int, int]] = []  # (weight, index), arrival order
    pending_weight, nxt, n = 0, 0, len(lengths)
    bins: list[list[int]] = []
    while nxt < n or pending:
        while nxt < n and pending_weight < window:
            w = lengths[nxt] + reserve_per_seq
            if lengths[nxt] <= 0 or w > budget:
                raise ValueError(f"sequence {nxt} has {lengths[nxt]} tokens; weight {w} exceeds the budget {budget}")
            pending.append((w, nxt))
            pending_weight += w
            nxt += 1
        w0, first = pending[0]
        chosen, room = [first], budget - w0
        for w, i in sorted(pending[1:], key=lambda p: (-p[0], p[1])):
            if len(chosen) == max_seqs:
                break
            if w <= room:
                chosen.append(i)
                room -= w
        taken = set(chosen)
        pending = [p for p in pending if p[1] not in taken]
        pending_weight -= budget - room
        bins.append(chosen)
    return bins
