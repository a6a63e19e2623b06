"""KV rows as free intervals: continuous batching's slot allocator (pure Python, no torch).

A running document owns one interval [start, start + size) of the KV pool's rows (its prompt plus
its reserve of generated tokens), so decode reads a contiguous slot and never pads. Intervals are
handed out first-fit and merged with their neighbours when freed, so two live slots never overlap
and the free space is never split finer than the slots that left it.

Written here rather than taken from a library: it is 50 lines over a sorted list, and the engine
needs exactly contiguous intervals (a paged allocator such as vLLM's block manager would need a
paged attention kernel).
"""

from __future__ import annotations

import bisect


class SlotAllocator:
    """Invariants: `_free` is sorted by start, its intervals are disjoint, non-empty and never adjacent
    (adjacent ones are merged); free rows + rows in use == capacity."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"slot capacity must be >= 1 row, got {capacity}")
        self.capacity = capacity
        self._free: list[tuple[int, int]] = [(0, capacity)]  # (start, size)
        self.used = 0

    @property
    def free_rows(self) -> int:
        return self.capacity - self.used

    def alloc(self, size: int) -> int | None:
        """First row of a free interval of `size` rows (first fit), or None when none is large enough."""
        if size < 1:
            raise ValueError(f"a slot needs >= 1 row, got {size}")
        for i, (start, n) in enumerate(self._free):
            if n >= size:
                if n == size:
                    del self._free[i]
                else:
                    self._free[i] = (start + size, n - size)
                self.used += size
                return start
        return None

    def free(self, start: int, size: int) -> None:
        """Give back [start, start + size); a ValueError when it overlaps free space (a double free)."""
        i = bisect.bisect_left(self._free, (start, 0))
        prev = self._free[i - 1] if i > 0 else None
        nxt = self._free[i] if i < len(self._free) else None
        if start < 0 or start + size > self.capacity or (prev and prev[0] + prev[1] > start) or (
                nxt and start + size > nxt[0]):
            raise ValueError(f"rows [{start}, {start + size}) are not a slot in use")
        lo, hi = start, start + size
        if prev and prev[0] + prev[1] == lo:
            lo = prev[0]
            i -= 1
            del self._free[i]
        if i < len(self._free) and self._free[i][0] == hi:
            hi += self._free[i][1]
            del self._free[i]
        self._free.insert(i, (lo, hi - lo))
        self.used -= size
