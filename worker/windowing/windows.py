"""Per-partition, per-key windows over a stream of one-line records: the pure assembly policy.

A record joins the open window of its (partition, key), or opens one. A window
closes on whichever comes first (the `reason` it carries):
- `gap`: no record for its key for `gap_s` of reading (a session window, as Kafka
  Streams' and Vector's `reduce` expire_after). Time while ingest has its
  partitions paused (`hold(True)`, backpressure) does not count: the key's next
  records may be waiting in the topic, unread;
- `max_length`: `max_length_s` since it opened;
- `max_lines` / `max_bytes`: it holds that many records (or bytes of text). A
  continuation line (worker/multiline.py) counts like any record and
  still joins a full window's open event, so a stack trace is not cut from its
  first line by a count, but only up to twice the bounds: at `2 * max_lines`
  records or `2 * max_bytes` bytes the window closes even mid-event, and the
  rest of the event opens the next window (an endless event cannot hold one
  window, or its memory, without bound);
- `max_open`: its partition's committed offset has been held for `max_open_s`
  (see below); every open window of that partition closes at once;
- `max_held`: a memory cap (`max_windows` open windows, `max_held_bytes` of
  text) is reached: the oldest open windows close at once until it is not, as
  Vector's reduce and Fluent Bit flush on their limits, so reading goes on;
- `revoked` never produces a window: a revoke drops the partition's windows.

Which clock `gap` and `max_length` run on is `Rules.time`: `poll` (the injected
clock, as records are read), or `record` / `event`, where the caller passes each
record's time (`ts_ms`: its Kafka timestamp, or its own time field) and a
partition's watermark is the newest time seen in it less `grace_s`. Then a key's
next record opens a new window when its time is `gap_s` past the window's latest
(or `max_length_s` past its earliest); `due` closes a window once the watermark
has passed its latest time by `gap_s` (or its earliest by `max_length_s`), or
when no record of its key came for `gap_s + grace_s` of reading (an idle
partition holds its watermark still). A record older than the watermark is
late: it is counted (`Window.late`, `late_records`) and joins its key's open
window, or opens one, never dropped (every record is in exactly one output).
`max_open`, `max_lines`, `max_bytes` and `max_held` are the same on every clock.
Records without a time take the `poll` rules.

Exactly-once without a state store: a window is committed with its output in
one transaction, and the committed offset of a partition may only move to a
point no window straddles (the offset tracker's windows, worker/pipeline/tracker.py).
With many keys interleaved such a point exists only when the partition has no
open window, so the windower makes one: once the partition's first record since
its last such point is `max_open_s` old, all its windows close. After a crash or
a rebalance, consumption resumes at the committed offset, which is such a
point: the windows simply form again from the records after it.

Memory: `held_bytes` and `open_windows` stay within the caps: the record that
reaches one closes the oldest windows (`max_held`, returned by `add`). `full()`
is still what the ingest stage checks before it pauses (it holds only between
that record and its windows' close). A key never holds more than one window of
`max_bytes`, so one key's flood closes its own windows quickly and cannot take
the others' room.

`add_many` (rows) and `add_columns` (the same as columns: the ingest stage's path) take a poll's records
of one partition at once, as `add` would one by one at the time of that poll (the clock is read once). On
the poll clock each key's records go in by slices (worker/windowing/bulk.py); on the record and event
clocks, or when a memory cap could be reached within the poll, one record at a time.

Pure: no Kafka, no threads; time comes from the injected `clock`
(time.monotonic in the worker, a fake in tests). Not thread-safe: the ingest
thread owns it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from worker.kafka.headers import TRACEPARENT, without_trace
from worker.multiline import joins
from worker.windowing.bulk import MAX_LINKS, BulkAdd, Columns
from worker.windowing.multiline import Joiner

TopicPartition = tuple[str, int]
Row = tuple  # (key, offset, line, ts_ms, first, headers): one record for `Windower.add_many`


CLOCKS = ("poll", "record", "event")


@dataclass(frozen=True)
class Rules:
    gap_s: float = 10.0
    max_length_s: float = 60.0
    max_lines: int = 2_000
    max_bytes: int = 262_144
    max_open_s: float = 60.0
    max_windows: int = 10_000          # open windows (all partitions) above which ingest pauses
    max_held_bytes: int = 268_435_456  # text held in open windows above which ingest pauses
    multiline: bool = True
    time: str = "poll"                 # the clock of gap_s and max_length_s: one of CLOCKS
    grace_s: float = 0.0               # record/event time: lateness allowed behind the partition's newest time

    def __post_init__(self) -> None:
        if self.time not in CLOCKS or self.grace_s < 0:
            raise ValueError(f"time must be one of {CLOCKS} and grace_s >= 0, got {self.time!r}, {self.grace_s}")
        for name in ("gap_s", "max_length_s", "max_open_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_lines", "max_bytes", "max_windows", "max_held_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(slots=True)
class Window:
    """An open (then closed) window of one key in one partition."""

    tp: TopicPartition
    epoch: int
    key: Hashable
    opened: float                    # clock() at its first record
    last: float                      # clock() at its latest record
    offsets: list[int] = field(default_factory=list)
    first_ts_ms: int | None = None   # the records' own timestamps (Kafka), earliest and latest
    last_ts_ms: int | None = None
    size: int = 0                    # bytes of text held
    joiner: Joiner = field(default_factory=Joiner)
    first: object = None             # the first record's extras (e.g. its kind), for the output
    last_held: float = 0.0           # the windower's paused seconds at its latest record
    reason: str = ""                 # why it closed
    closed: float | None = None      # clock() when it closed
    clock: str = "poll"              # the clock its gap and max_length ran on (Rules.time)
    late: int = 0                    # records older than their partition's watermark when read (record/event time)
    read_first_ms: int = 0           # wall clock (ms since the epoch) when its first and latest records were read
    read_last_ms: int = 0
    headers: list | None = None      # the headers every record of it carries, equal (trace headers aside)
    traceparents: list = field(default_factory=list)   # its records' trace parents, at most MAX_LINKS

    @property
    def records(self) -> int:
        return len(self.offsets)

    def text(self) -> str:
        return self.joiner.text()


class Windower(BulkAdd):
    """Assembles windows; `add` and `due` return the windows that closed (see the module docstring)."""

    def __init__(self, rules: Rules, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.rules, self.clock, self.wall = rules, clock, wall
        self._mark: dict[TopicPartition, int] = {}     # record/event time: the newest time seen per partition (ms)
        self.late_records = 0
        self._open: dict[TopicPartition, dict[Hashable, Window]] = {}
        self._since: dict[TopicPartition, float] = {}  # the partition's first record since no window was open
        self.held_bytes = 0
        self._held_records = 0
        self._order: OrderedDict[tuple[TopicPartition, Hashable], Window] = OrderedDict()  # open, oldest first
        self._held_s = 0.0                      # seconds spent paused (hold), up to _held_at
        self._held_at: float | None = None      # clock() when the current pause began, None while reading

    def hold(self, paused: bool) -> None:
        """Ingest paused (or resumed) its partitions: paused time does not count toward a key's gap."""
        if paused and self._held_at is None:
            self._held_at = self.clock()
        elif not paused and self._held_at is not None:
            self._held_s += self.clock() - self._held_at
            self._held_at = None

    def _held(self, now: float) -> float:
        """Seconds paused so far (at `now`)."""
        return self._held_s + (now - self._held_at if self._held_at is not None else 0.0)

    def _silent(self, w: Window, now: float, held: float) -> float:
        """Seconds of reading since `w`'s latest record."""
        return (now - w.last) - (held - w.last_held)

    @property
    def open_windows(self) -> int:
        return len(self._order)

    @property
    def held_records(self) -> int:
        """Records in open windows (bounded by the caps here, not by the in-flight message watermarks)."""
        return self._held_records

    def full(self) -> bool:
        """At either memory cap: the ingest stage pauses until windows close."""
        return self.open_windows >= self.rules.max_windows or self.held_bytes >= self.rules.max_held_bytes

    def add(self, tp: TopicPartition, epoch: int, key: Hashable, offset: int, line: str,
            ts_ms: int | None = None, first: object = None, headers: list | None = None) -> list[Window]:
        """Take one record; returns the windows it closed (its key's window that time or a count closed, or
        every window of its partition at max_open). `ts_ms`: the record's time (record/event clocks decide on
        it; on the poll clock it only labels the window); `headers`: its Kafka headers."""
        now = self.clock()
        closed = self._restart(tp, epoch, now)
        return closed + self._add_rows(tp, epoch, ((key, offset, line, ts_ms, first, headers),), now, None)

    def add_many(self, tp: TopicPartition, epoch: int, rows: Sequence[Row],
                 failed: Callable[[int, Exception], None] | None = None) -> list[Window]:
        """Take the records of one partition read at once (one poll), in offset order: as `add` for each row,
        with the clock read once (the time of that poll). Returns the windows they closed, in order. `failed`:
        told the row's index and the exception when one row raises (the others go on); without it, it raises."""
        if not rows:
            return []
        return self.add_columns(tp, epoch, Columns(*map(list, zip(*rows))), failed)

    def add_columns(self, tp: TopicPartition, epoch: int, c: Columns,
                    failed: Callable[[int, Exception], None] | None = None) -> list[Window]:
        """`add_many` of the records as columns (worker/windowing/bulk.py), the ingest stage's path: on the poll
        clock each key's records go in by slices (`BulkAdd`), else, or when that path is not taken, one by one."""
        if not c.keys:
            return []
        now = self.clock()
        closed = self._restart(tp, epoch, now)
        if self.rules.time == "poll":
            bulk = self._add_bulk(tp, epoch, c, now, self._held(now), int(self.wall() * 1e3))
            if bulk is not None:
                return closed + bulk
        return closed + self._add_rows(tp, epoch, list(zip(*c)), now, failed)

    def _window(self, tp: TopicPartition, epoch: int, key: Hashable, now: float, first: object,
                headers: list | None, wall_ms: int, clock: str = "poll") -> Window:
        """A new window of `key`, its first record read at `now` (not yet among the open ones)."""
        return Window(tp, epoch, key, now, now, joiner=Joiner(self.rules.multiline), first=first, clock=clock,
                      read_first_ms=wall_ms, headers=without_trace(headers))

    def _add_rows(self, tp: TopicPartition, epoch: int, rows: Sequence[Row], now: float,
                  failed: Callable[[int, Exception], None] | None) -> list[Window]:
        """The records one at a time (after `_restart`); returns the windows they closed, in order."""
        r = self.rules
        held = self._held(now)
        wall_ms = int(self.wall() * 1e3)
        closed: list[Window] = []
        windows = None
        poll_clock = r.time == "poll"
        gap_s, length_s, gap_ms, length_ms = r.gap_s, r.max_length_s, r.gap_s * 1e3, r.max_length_s * 1e3
        max_lines, max_bytes, multiline = r.max_lines, r.max_bytes, r.multiline
        for i, (key, offset, line, ts_ms, first, headers) in enumerate(rows):
            try:
                if windows is None:
                    windows = self._open.setdefault(tp, {})
                w = windows.get(key)
                event = not poll_clock and ts_ms is not None
                late = event and self._late(tp, ts_ms)
                if w is not None:
                    if event and w.last_ts_ms is not None:
                        silent = not late and ts_ms - w.last_ts_ms >= gap_ms
                        too_long = not late and ts_ms - w.first_ts_ms >= length_ms
                    else:
                        silent = (now - w.last) - (held - w.last_held) >= gap_s  # _silent
                        too_long = now - w.opened >= length_s
                    if silent or too_long:
                        closed.append(self._close(tp, key, "gap" if silent else "max_length", now))
                        w = windows = None
                    elif (w.size >= max_bytes or len(w.offsets) >= max_lines) and not (
                            multiline and w.size < 2 * max_bytes and len(w.offsets) < 2 * max_lines
                            and joins(line)):  # a continuation's slack: up to twice the bounds, then it is cut
                        closed.append(self._close(tp, key, "max_lines" if w.records >= max_lines else "max_bytes",
                                                  now))
                        w = windows = None
                if w is None:
                    windows = self._open.setdefault(tp, {})
                    if not windows:
                        self._since[tp] = now
                    w = windows[key] = self._window(tp, epoch, key, now, first, headers, wall_ms,
                                                    r.time if ts_ms is not None else "poll")
                    self._order[(tp, key)] = w
                elif w.headers:
                    kept = set(without_trace(headers))
                    w.headers = [h for h in w.headers if h in kept]
                if late:
                    w.late += 1
                    self.late_records += 1
                w.read_last_ms = wall_ms
                if headers and len(w.traceparents) < MAX_LINKS:
                    w.traceparents.extend(v for k, v in headers if k == TRACEPARENT and v)
                size = (len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))) + 1
                w.joiner.append(line)
                w.offsets.append(offset)
                w.last, w.last_held, w.size = now, held, w.size + size
                self.held_bytes += size
                self._held_records += 1
                if ts_ms is not None:
                    if w.first_ts_ms is None:
                        w.first_ts_ms = w.last_ts_ms = ts_ms
                    elif ts_ms < w.first_ts_ms:
                        w.first_ts_ms = ts_ms
                    elif ts_ms > w.last_ts_ms:
                        w.last_ts_ms = ts_ms
                if len(self._order) >= r.max_windows or self.held_bytes >= r.max_held_bytes:  # full()
                    closed.extend(self._make_room(now))
                    windows = None
            except Exception as exc:  # noqa: BLE001 - routed to `failed` (the ingest stage's guard) or raised
                if failed is None:
                    raise
                failed(i, exc)
                windows = None
        return closed

    def _restart(self, tp: TopicPartition, epoch: int, now: float) -> list[Window]:
        """Before a poll's records: a partition that came back drops its old windows; one whose committed offset
        has been held `max_open_s` closes them all (`max_open`). Returns the windows closed."""
        windows = self._open.get(tp)
        if not windows:
            return []
        if next(iter(windows.values())).epoch != epoch:  # the partition came back: old windows go
            self.drop([tp])
            return []
        if now - self._since.get(tp, now) >= self.rules.max_open_s:
            return [self._close(tp, k, "max_open", now) for k in sorted(windows, key=lambda k: windows[k].opened)]
        return []

    def _late(self, tp: TopicPartition, ts_ms: int) -> bool:
        """Record/event time: is `ts_ms` behind its partition's watermark? Moves the watermark on."""
        mark = self._mark.get(tp)
        if mark is None or ts_ms > mark:
            self._mark[tp] = ts_ms
        return mark is not None and ts_ms < mark - self.rules.grace_s * 1e3

    def _expired(self, tp: TopicPartition, w: Window, now: float, held: float) -> str | None:
        """Why time closes `w` now (gap or max_length), or None; see the module docstring."""
        r = self.rules
        silent = self._silent(w, now, held)
        mark = self._mark.get(tp) if r.time != "poll" else None
        if mark is None or w.last_ts_ms is None:
            return "gap" if silent >= r.gap_s else "max_length" if now - w.opened >= r.max_length_s else None
        watermark = mark - r.grace_s * 1e3
        if watermark - w.last_ts_ms >= r.gap_s * 1e3 or silent >= r.gap_s + r.grace_s:
            return "gap"
        return "max_length" if watermark - w.first_ts_ms >= r.max_length_s * 1e3 else None

    def _make_room(self, now: float) -> list[Window]:
        """At a memory cap: close the oldest open windows until below both caps (`max_held`)."""
        r = self.rules
        out = []
        while self._order and (len(self._order) >= r.max_windows or self.held_bytes >= r.max_held_bytes):
            w = next(iter(self._order.values()))
            out.append(self._close(w.tp, w.key, "max_held", now))
        return out

    def due(self, now: float | None = None) -> list[Window]:
        """The windows that time has closed (gap, max_length, max_open), oldest first."""
        now = self.clock() if now is None else now
        r = self.rules
        held = self._held(now)
        out: list[Window] = []
        for tp in list(self._open):
            windows = self._open[tp]
            if windows and now - self._since.get(tp, now) >= r.max_open_s:
                for key in sorted(windows, key=lambda k: windows[k].opened):
                    out.append(self._close(tp, key, "max_open", now))
                continue
            expired = [(k, why) for k, w in windows.items() if (why := self._expired(tp, w, now, held)) is not None]
            for key, why in expired:
                out.append(self._close(tp, key, why, now))
        out.sort(key=lambda w: w.opened)
        return out

    def flush(self, tps: list[TopicPartition] | None = None) -> list[Window]:
        """Close every open window (of `tps`, default all): a drain at shutdown."""
        now = self.clock()
        out = []
        for tp in list(self._open) if tps is None else tps:
            for key in list(self._open.get(tp, {})):
                out.append(self._close(tp, key, "flush", now))
        return out

    def drop(self, tps: list[TopicPartition]) -> int:
        """Forget the open windows of revoked or lost partitions (their records are read again by whoever
        owns the partition next); returns how many."""
        n = 0
        for tp in tps:
            windows = self._open.pop(tp, {})
            self._since.pop(tp, None)
            self._mark.pop(tp, None)
            n += len(windows)
            for key in windows:
                del self._order[(tp, key)]
            self._held_records -= sum(w.records for w in windows.values())
            self.held_bytes -= sum(w.size for w in windows.values())
        return n

    def _close(self, tp: TopicPartition, key: Hashable, reason: str, now: float) -> Window:
        windows = self._open[tp]
        w = windows.pop(key)
        w.reason, w.closed = reason, now
        self.held_bytes -= w.size
        self._held_records -= w.records
        del self._order[(tp, key)]
        if not windows:
            del self._open[tp]
            self._since.pop(tp, None)  # no window open: the partition's offset may commit through here
        return w
