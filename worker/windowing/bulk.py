"""A poll's records of one partition taken per key, on the poll clock: the windower's batch path.

`Windower.add_columns` (worker/windowing/windows.py) hands a poll's records here as columns when its
windows run on the worker's clock (`Rules.time = "poll"`). The records of one poll share the time of
that poll, so a key's gap and length are decided once, at its first record in the poll; what is left
per record is its count and bytes against `max_lines` / `max_bytes`. Those are prefix sums: the
records of a key that go into its window without a check (the window under both bounds before each)
are appended as one slice, and only the record at a bound is looked at alone (a continuation line's
slack, worker/windowing/windows.py). Opens and closes are recorded with the index of the record that
made them and applied in that order at the end, so the windows, their order, the partition's commit
point (`_since`) and every count are those of the records taken one by one.

Not taken (`None`, nothing changed; the caller goes one record at a time): when a memory cap could
be reached within the poll (`max_windows` open windows counting every key of the poll not open yet,
`max_held_bytes` counting every byte of it), or when a row is not a record (a line that is not a
`str`, headers that are not (name, value) pairs): one by one, such a row is told to `failed`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from itertools import accumulate
from operator import itemgetter
from typing import NamedTuple

from worker.kafka.headers import TRACEPARENT, without_trace
from worker.multiline import joins

MAX_LINKS = 128              # trace parents kept per window (OpenTelemetry's default limit of links per span)
_EVENT_ORDER = itemgetter(0, 1)  # (record index, 0 close | 1 open): a record closes its key's window, then opens


class Columns(NamedTuple):
    """A poll's records of one partition, in offset order, one list per field."""

    keys: Sequence[Hashable]
    offsets: Sequence[int]
    lines: Sequence[str]
    times: Sequence[int | None]      # each record's time (ms) or None; on the poll clock it only labels
    firsts: Sequence[object]         # each record's extras (its kind), kept from a window's first record
    headers: Sequence[list | None]   # each record's Kafka headers


def sizes_of(lines: Sequence[str]) -> list[int]:
    """Bytes each line holds in a window (its UTF-8 length and the newline that joins it)."""
    return [len(s) + 1 if s.isascii() else len(s.encode("utf-8", "surrogatepass")) + 1 for s in lines]


class BulkAdd:
    """`Windower`'s batch path (a mixin: it works on the windower's own state; see the module docstring)."""

    def _add_bulk(self, tp, epoch: int, c: Columns, now: float, held: float, wall_ms: int) -> list | None:
        r = self.rules
        windows = self._open.get(tp) or {}
        try:
            sizes = sizes_of(c.lines)
            keys = set(c.keys)
            if any(c.headers):
                first_headers = [without_trace(h) if h else [] for h in c.headers]
                kept = [set(h) for h in first_headers]
            else:
                first_headers = kept = None
        except (AttributeError, TypeError, ValueError):
            return None
        new_keys = sum(1 for k in keys if k not in windows)
        total = sum(sizes)
        if len(self._order) + new_keys >= r.max_windows or self.held_bytes + total >= r.max_held_bytes:
            return None
        groups: dict = {}
        for i, k in enumerate(c.keys):
            g = groups.get(k)
            if g is None:
                groups[k] = [i]
            else:
                g.append(i)
        events: list[tuple] = []
        for key, idx in groups.items():
            self._group(tp, epoch, key, idx, windows.get(key), c, sizes, (now, held, wall_ms, first_headers, kept),
                        events)
        self.held_bytes += total
        self._held_records += len(sizes)
        events.sort(key=_EVENT_ORDER)
        closed = []
        for _, kind, key, w, reason in events:
            if kind == 0:
                closed.append(self._close(tp, key, reason, now))
                continue
            opened = self._open.setdefault(tp, {})
            if not opened:
                self._since[tp] = now
            opened[key] = w
            self._order[(tp, key)] = w
        return closed

    def _group(self, tp, epoch: int, key, idx: list[int], w, c: Columns, sizes: list[int], at: tuple,
               events: list) -> None:
        """One key's records of the poll (`idx`, ascending) into its windows; opens and closes onto `events`."""
        r = self.rules
        now, held, wall_ms, first_headers, _ = at
        if w is not None:
            silent = (now - w.last) - (held - w.last_held) >= r.gap_s
            if silent or now - w.opened >= r.max_length_s:
                events.append((idx[0], 0, key, w, "gap" if silent else "max_length"))
                w = None
        prefix = [0, *accumulate(sizes[i] for i in idx)]
        m, p = len(idx), 0
        max_lines, max_bytes = r.max_lines, r.max_bytes
        while p < m:
            i = idx[p]
            opener = w is None
            if opener:
                w = self._window(tp, epoch, key, now, c.firsts[i], None if first_headers is None else first_headers[i],
                                 wall_ms)
                events.append((i, 1, key, w, ""))
            elif w.size >= max_bytes or len(w.offsets) >= max_lines:
                if r.multiline and w.size < 2 * max_bytes and len(w.offsets) < 2 * max_lines and joins(c.lines[i]):
                    self._take(w, idx, p, p + 1, prefix, c, at, False)  # a continuation's slack: this one joins
                    p += 1
                else:
                    events.append((i, 0, key, w, "max_lines" if len(w.offsets) >= max_lines else "max_bytes"))
                    w = None
                continue
            # the records that go in unchecked: the window under both bounds before each of them
            k = min(m, p + max_lines - len(w.offsets), bisect_left(prefix, max_bytes - w.size + prefix[p], p, m))
            self._take(w, idx, p, k, prefix, c, at, opener)
            p = k

    @staticmethod
    def _take(w, idx: list[int], p: int, k: int, prefix: list[int], c: Columns, at: tuple, opener: bool) -> None:
        """The key's records idx[p:k] appended to `w` (the first of them opened it when `opener`)."""
        now, held, wall_ms, first_headers, kept = at
        sel = idx[p:k]
        lines, offsets, times = c.lines, c.offsets, c.times
        if len(sel) == 1:
            i = sel[0]
            w.joiner.append(lines[i])
            w.offsets.append(offsets[i])
            stamps = [] if times[i] is None else [times[i]]
        else:
            w.joiner.extend([lines[i] for i in sel])
            w.offsets.extend([offsets[i] for i in sel])
            stamps = [t for t in map(times.__getitem__, sel) if t is not None]
        w.size += prefix[k] - prefix[p]
        w.last, w.last_held, w.read_last_ms = now, held, wall_ms
        if stamps:
            lo, hi = min(stamps), max(stamps)
            if w.first_ts_ms is None:
                w.first_ts_ms, w.last_ts_ms = lo, hi
            else:
                w.first_ts_ms, w.last_ts_ms = min(w.first_ts_ms, lo), max(w.last_ts_ms, hi)
        later = sel[1:] if opener else sel  # records after the window's first: its headers are those all share
        if kept is None:
            if later and w.headers:
                w.headers = []
            return
        for i in later:
            if not w.headers:
                break
            w.headers = [h for h in w.headers if h in kept[i]]
        for i in sel:
            h = c.headers[i]
            if h and len(w.traceparents) < MAX_LINKS:
                w.traceparents.extend(v for n, v in h if n == TRACEPARENT and v)
