"""Offsets that never lie: which input offsets are done, and which outputs may go out with them.

Offsets ride with the data. The ingest thread registers every offset it sees
(offsets are not contiguous: compaction and transaction markers leave gaps);
the GPU and ingest threads complete them with the records to produce (a
summary, or a dead-letter record). The delivery thread takes, per partition,
the longest prefix of seen offsets that are all complete: those outputs and the
offset after the last of them go out together (one transaction, or produce
then store). Results that finish out of order wait here: the reorder buffer.

Windows (worker/windowing/): the records of one window are registered as a group
(`group`) when it closes; completing its first offset completes them all, its
output riding on the first. A run taken for commit never ends inside a group:
it ends only where no group straddles (`reach`), so an output commits with all
its records' offsets and no record's offset commits before its window's output.
The records of open windows are seen but not done, so they hold their
partition's committed offset back, as any unfinished document does.

Every partition assignment gets a fresh epoch; results of an older epoch of
the same partition (revoked, then assigned back) are dropped, never produced.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from itertools import chain, islice, repeat
from operator import lt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.pipeline.spill import Spilled

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Record:
    """One message to produce: to the output or the dead-letter topic."""

    topic: str
    key: bytes | None
    value: bytes | Spilled | None  # Spilled: a large dead-letter value waiting on disk (spill.py)
    headers: tuple[tuple[str, bytes], ...] = ()

    @property
    def size(self) -> int:
        return len(self.value) if self.value is not None else 0


@dataclass
class _Partition:
    epoch: int
    seen: deque[int] = field(default_factory=deque)  # offsets in arrival (= offset) order
    seen_at: deque[float] = field(default_factory=deque)  # time.monotonic() of each, same order
    done: dict[int, tuple[Record, ...]] = field(default_factory=dict)
    committed: int | None = None  # the next offset to consume after what is committed (None: not known yet)
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict)  # a window's first offset -> all its offsets
    reach: dict[int, int] = field(default_factory=dict)  # offset in a group -> the group's last offset
    sizes: dict[int, int] = field(default_factory=dict)  # a seen window's first offset -> its offsets' count
    # _committable's progress over a complete prefix of `seen` that has no cut point yet (offsets, records,
    # bytes, reach): the next call goes on from there. Set back to None whenever the prefix changes (a take
    # or a put_back); `see`, `group` and `complete` never change it (a group's offsets are not done before
    # it closes, and done offsets stay done).
    scan: tuple[int, int, int, int] | None = None
    followers: int = 0  # seen offsets of windows past each window's first (a window counts as one document)


@dataclass(frozen=True)
class Ready:
    """A committable run of one partition: its records, in offset order, and the offset to commit."""

    tp: TopicPartition
    epoch: int
    records: tuple[Record, ...]
    offsets: tuple[int, ...]

    @property
    def next_offset(self) -> int:
        return self.offsets[-1] + 1


class OffsetTracker:
    """Thread-safe per-partition reorder buffer over the offsets actually seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[TopicPartition, _Partition] = {}
        self._next_epoch = 1

    def assign(self, tp: TopicPartition) -> int:
        """Start tracking a newly assigned partition; returns its epoch (also its packer key)."""
        with self._lock:
            epoch = self._next_epoch
            self._next_epoch += 1
            self._parts[tp] = _Partition(epoch)
            return epoch

    def revoke(self, tp: TopicPartition) -> None:
        """Forget a partition: pending and completed-but-uncommitted results are dropped."""
        with self._lock:
            self._parts.pop(tp, None)

    def epoch(self, tp: TopicPartition) -> int | None:
        with self._lock:
            p = self._parts.get(tp)
            return p.epoch if p else None

    def see(self, tp: TopicPartition, epoch: int, offset: int) -> bool:
        """Register an offset as consumed; False if the partition is not (or no longer) ours."""
        with self._lock:
            p = self._parts.get(tp)
            if p is None or p.epoch != epoch:
                return False
            if p.seen and offset <= p.seen[-1]:
                return False  # a rewind (e.g. offset reset): that offset is already tracked
            if p.committed is None:
                p.committed = offset  # a fresh assignment resumes at the group's committed offset
            p.seen.append(offset)
            p.seen_at.append(time.monotonic())
            return True

    def see_many(self, tp: TopicPartition, epoch: int, offsets: list[int]) -> list[bool]:
        """`see` for each of one partition's offsets from one poll, under one lock: which were registered."""
        with self._lock:
            p = self._parts.get(tp)
            if p is None or p.epoch != epoch:
                return [False] * len(offsets)
            seen, last, now = p.seen, p.seen[-1] if p.seen else -1, time.monotonic()
            if p.committed is None and offsets:
                p.committed = offsets[0]  # a fresh assignment resumes at the group's committed offset
            if offsets and offsets[0] > last and all(map(lt, offsets, islice(offsets, 1, None))):
                seen.extend(offsets)  # increasing past the last seen (a poll's, as a rule): every one is new
                p.seen_at.extend([now] * (len(seen) - len(p.seen_at)))
                return [True] * len(offsets)
            out = []
            for off in offsets:
                if off <= last:
                    out.append(False)  # a rewind (e.g. offset reset): that offset is already tracked
                    continue
                seen.append(off)
                last = off
                out.append(True)
            p.seen_at.extend([now] * (len(seen) - len(p.seen_at)))
            return out

    def mark_committed(self, ready: list[Ready]) -> None:
        """Delivery committed these runs (or, at least once, handed their offsets to the commit)."""
        with self._lock:
            for r in ready:
                p = self._parts.get(r.tp)
                if p is not None and p.epoch == r.epoch:
                    p.committed = max(p.committed or 0, r.next_offset)

    def progress(self, tp: TopicPartition) -> tuple[int | None, int]:
        """(committed next offset or None if not known yet, offsets fetched but not yet committed)."""
        with self._lock:
            p = self._parts.get(tp)
            return (None, 0) if p is None else (p.committed, len(p.seen))

    def group(self, tp: TopicPartition, epoch: int, offsets: list[int]) -> bool:
        """Register a closed window's offsets (seen, in increasing order): completing the first completes
        them all, and no run is taken that ends inside them. False if the epoch is gone."""
        with self._lock:
            p = self._parts.get(tp)
            if p is None or p.epoch != epoch or not offsets:
                return False
            p.groups[offsets[0]] = tuple(offsets)
            p.sizes[offsets[0]] = len(offsets)
            p.followers += len(offsets) - 1
            p.reach.update(dict.fromkeys(offsets[:-1], offsets[-1]))
            return True

    def complete(self, tp: TopicPartition, epoch: int, offset: int, records: tuple[Record, ...]) -> bool:
        """Attach the records of a finished offset (a window: of all its offsets, riding on the first);
        False (dropped) if its epoch is gone."""
        with self._lock:
            p = self._parts.get(tp)
            if p is None or p.epoch != epoch:
                return False
            p.done.update(dict.fromkeys(p.groups.pop(offset, ())[1:], ()))
            p.done[offset] = records
            return True

    def take_ready(self, max_records: int | None = None, max_bytes: int | None = None) -> list[Ready]:
        """Pop, per partition, the longest complete prefix of seen offsets (at most `max_records` records
        and, past the first record, `max_bytes` of values in all: one transaction's share of memory)."""
        out: list[Ready] = []
        size = 0
        with self._lock:
            for tp, p in self._parts.items():
                n = _committable(p, max_records, max_bytes, size)
                if not n:
                    continue
                # A backlog's windows hold their partition's offsets until its last window is done, then
                # hand over every one at once (tens of thousands): each step below is one loop in C.
                offs = tuple(islice(p.seen, n))
                p.seen, p.seen_at = _drop_left(p.seen, n), _drop_left(p.seen_at, n)
                _consume(map(p.reach.pop, offs, repeat(None)))
                if p.sizes:
                    p.followers -= sum(map(p.sizes.pop, offs, repeat(1))) - n
                recs = tuple(chain.from_iterable(map(p.done.pop, offs)))
                size += sum(r.size for r in recs)
                out.append(Ready(tp, p.epoch, recs, offs))
        return out

    def put_back(self, ready: list[Ready]) -> list[Ready]:
        """Return taken runs (their transaction aborted) so they go out again, in order; the runs dropped
        instead (their partition revoked meanwhile: another consumer redoes them)."""
        dropped: list[Ready] = []
        with self._lock:
            for r in ready:
                p = self._parts.get(r.tp)
                if p is None or p.epoch != r.epoch:
                    dropped.append(r)
                    continue
                p.scan = None  # the prefix changes
                # The run's records ride on its first offset; the others carry none.
                # The run goes out whole again: its offsets reach its last (no retake ends inside it).
                now = time.monotonic()
                for off in reversed(r.offsets):
                    p.seen.appendleft(off)
                    p.seen_at.appendleft(now)
                    p.done[off] = ()
                    if off != r.offsets[-1]:
                        p.reach[off] = r.offsets[-1]
                p.done[r.offsets[0]] = r.records
        return dropped

    def holding(self) -> list[tuple[TopicPartition, int, float]]:
        """Per partition whose oldest seen offset is unfinished: (partition, that offset, seconds since seen).
        That offset holds every later result of its partition back from commit."""
        now = time.monotonic()
        with self._lock:
            return [(tp, p.seen[0], now - p.seen_at[0]) for tp, p in self._parts.items()
                    if p.seen and (p.seen[0] not in p.done or p.seen[0] in p.reach)]

    def pending(self) -> int:
        """Offsets seen but not yet taken (in flight or waiting in the reorder buffer)."""
        with self._lock:
            return sum(len(p.seen) for p in self._parts.values())

    def pending_documents(self) -> int:
        """As `pending`, with a closed window's offsets counted once: the documents in flight or waiting
        (a window of 400 records is one document to process and one output to hold)."""
        with self._lock:
            return sum(len(p.seen) - p.followers for p in self._parts.values())

    def waiting(self) -> int:
        """Completed offsets held back behind an unfinished one (the reorder buffer's size)."""
        with self._lock:
            return sum(len(p.done) for p in self._parts.values())

    def partitions(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._parts)


def _drop_left(d: deque, n: int) -> deque:
    """`d` without its first `n` items: popped one by one when they are few, else the rest copied once."""
    if 2 * n <= len(d):
        for _ in repeat(None, n):
            d.popleft()
        return d
    return deque(islice(d, n, None))


def _consume(it) -> None:
    """Run an iterator to its end (in C: a deque that keeps nothing)."""
    deque(it, maxlen=0)


def _committable(p: _Partition, max_records: int | None, max_bytes: int | None, size: int) -> int:
    """How many of `p.seen` to take: the longest complete prefix that ends where no group straddles
    (within `max_records` records and, past the first, `max_bytes` in all, counting `size` taken so far).

    Interleaved windows keep a long complete prefix without a cut point until the last of them closes;
    `p.scan` remembers how far such a prefix was read, so each call reads only the offsets after it
    (the limits stop a scan only past a cut point, so none stopped inside the remembered prefix)."""
    best = 0
    n, records, nbytes, reach = p.scan or (0, 0, 0, -1)
    size += nbytes
    for off in islice(p.seen, n, None):
        recs = p.done.get(off)
        if recs is None:
            break
        if max_records is not None and records and records + len(recs) > max_records and best:
            break
        nxt = sum(r.size for r in recs) if recs else 0  # a window's records ride on its first offset
        if max_bytes is not None and size and size + nxt > max_bytes and best:
            break
        n, records, size, nbytes = n + 1, records + len(recs), size + nxt, nbytes + nxt
        reach = max(reach, p.reach.get(off, off))
        if reach <= off:
            best = n  # no group straddles the end of this prefix
    p.scan = None if best else (n, records, nbytes, reach)
    return best
