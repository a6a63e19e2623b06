"""The ingest stage's windowing hook: one-line records in, window documents out.

Called only by the ingest thread (which owns it), between the tracker's `see`
and the preprocessing pool:
- `add(msg, tp, epoch)`: one record of a line topic. Its line and key are read
  (plain text; or a JSON object's `text`/`message`/`log`/`msg` with the key at
  `windowing.key_field`); a record without a usable line is dead-lettered at
  once (it commits like any output). Returns the documents of the windows it
  closed.
- `due(draining)`: the documents of the windows that time closed (all of them
  when draining: a drain publishes what it holds).
- `drop(tps)`: a revoke or a loss forgets the partitions' open windows; their
  records were never committed, so whoever owns the partition next reads them
  again and forms the windows anew.
- `hold(paused)`: ingest paused or resumed its partitions (a paused key's
  silence is not a gap: its records may be waiting in the topic).
- `full()`: the memory caps (reached only between a record and the windows it
  closes to make room: worker/windowing/windows.py `max_held`).

A closed window becomes one `Doc` (first offset, key, text of its events) and
its offsets are registered as one group in the offset tracker: its output
commits with all of them, and no commit ends inside it (worker/pipeline/tracker.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import NamedTuple

import orjson

from worker.digest.timeparse import parse_line
from worker.messages.shippers import LINE_FIELDS, iso_ms, read_record
from worker.errors import RibbonError
from worker.pipeline.inflight import Doc
from worker.pipeline.tracker import OffsetTracker
from worker.windowing.bulk import Columns
from worker.windowing.hosts import host_of
from worker.windowing.windows import Rules, Window, Windower


_NOT_PLAIN = frozenset(b"{ \t\n\r\x0b\x0c")  # first bytes `_read` does not take for a plain line ('{', space)
_SEP = b"\x00"  # joins a poll's values to read them at once (`_plain`); a value holding it is read alone
# a joined value that `_read` reads as JSON: `{` first, or after bytes.isspace() whitespace and str.lstrip()'s
_JSON = rb"(?:\{|[ \t\n\r\x0b\x0c][ \t\n\r\x0b\x0c\x1c-\x1f]*\{)"
_JSON_FIRST, _JSON_NEXT = re.compile(_JSON), re.compile(_SEP + _JSON)  # the first value; the others
MAX_NAMES = 10_000  # Kafka keys whose text `_plain` keeps (decoded once); past it the cache starts again


class Line(NamedTuple):
    line: str
    key: str
    kind: str | None
    time_ms: int | None = None   # the record's own time field (a shipper's, worker/messages/shippers.py)


class NoLine(RibbonError, ValueError):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class, self.message = error_class, message


def rules_of(w) -> Rules:
    """Rules from the `windowing` settings group: a partition's windows hold its commits for max_length_s
    at most (on the worker's clock); the count of open windows keeps Rules' bound (max_held_bytes bounds
    their memory)."""
    return Rules(gap_s=w.gap_s, max_length_s=w.max_length_s, max_lines=w.max_lines, max_bytes=w.max_bytes,
                 max_open_s=w.max_length_s, max_held_bytes=w.max_held_bytes,
                 multiline=w.multiline, time=w.time, grace_s=w.grace_s)


class LineStream:
    def __init__(self, config, *, tracker: OffsetTracker, dead_letter: Callable[..., object], metrics=None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`config`: ingest's (worker/pipeline/ingest.py: windowing, input_topics, max_message_bytes)."""
        w = config.windowing
        self.topics = frozenset(w.topics or config.input_topics)
        self.key_path = tuple(w.key_field.split(".")) if w.key_field else None
        self.key_regex = re.compile(w.key_regex) if w.key_regex else None
        self.max_bytes = config.max_message_bytes
        self.tracker, self.dead_letter, self.metrics = tracker, dead_letter, metrics  # metrics: worker/observability/metrics.py
        self.windows = Windower(rules_of(w), clock)
        self.clock_kind = w.time
        self._kafka_key = self.key_path is None and self.key_regex is None  # the Kafka key comes first
        self._names: dict[bytes, str] = {}  # Kafka keys and their text (`_plain`)

    def full(self) -> bool:
        """At a memory cap (ingest pauses); also exports the open windows and the bytes they hold."""
        if self.metrics is not None:
            self.metrics.open_windows.set(self.windows.open_windows)
            self.metrics.window_bytes.set(self.windows.held_bytes)
            self.metrics.window_records.set(self.windows.held_records)
        return self.windows.full()

    def hold(self, paused: bool) -> None:
        """Ingest's partitions paused (or resumed): paused time does not count toward a key's gap."""
        self.windows.hold(paused)

    def held_records(self) -> int:
        return self.windows.held_records

    def add_many(self, msgs: list, tp, epoch: int, failed: Callable[[object, Exception], None] | None = None,
                 read: tuple[list[int], list[tuple[int, int]]] | None = None) -> list[Doc]:
        """Records of one partition from one poll, in offset order: each one's line and key read, those without
        a line dead-lettered, the others given to the windower at once (`Windower.add_columns`). Returns the
        documents of the windows they closed. `failed(msg, exc)`: one record's unexpected exception (the
        ingest stage's guard); without it, it raises. `read`: the records' offsets and timestamps when the
        caller has read them already (the ingest stage's source), else they are read here."""
        if not msgs:
            return []
        offsets, stamps = read if read is not None else ([m.offset() for m in msgs], [m.timestamp() for m in msgs])
        cols = self._plain(msgs, offsets, stamps) if self._kafka_key else None
        taken = msgs
        if cols is None:
            cols, taken = self._one_by_one(msgs, tp, epoch, failed, offsets, stamps)
            if cols is None:
                return []
        late = self.windows.late_records
        closed = self.windows.add_columns(tp, epoch, cols, None if failed is None else
                                          lambda i, exc: failed(taken[i], exc))
        if self.metrics is not None and self.windows.late_records > late:
            self.metrics.late_records.inc(self.windows.late_records - late)
        return self._docs(closed) if closed else []

    def _plain(self, msgs: list, offsets: list[int], stamps: list[tuple[int, int]]) -> Columns | None:
        """The poll's records as columns, read at once, when every one is ASCII text that is not JSON (it starts
        with no `{`, after whitespace or not) under a Kafka key, the case of a shipper's lines keyed by host: the values joined and
        split again, the keys decoded once per key. None when a record is not (then `_one_by_one`); the lines
        and keys are those `_read` gives each record."""
        kkeys = [m.key() for m in msgs]
        if None in kkeys:
            return None
        values = [m.value() for m in msgs]
        if None in values or max(map(len, values)) > self.max_bytes:
            return None
        joined = _SEP.join(values)
        if not joined.isascii() or _JSON_FIRST.match(joined) or _JSON_NEXT.search(joined):
            return None
        lines = joined.decode("ascii").split("\x00")
        if len(lines) != len(values):  # a value holds the separator
            return None
        if b"\r" in joined or b"\n" in joined:
            lines = [s.rstrip("\r\n") for s in lines]
        names = self._names
        try:
            keys = [names[k] for k in kkeys]
        except KeyError:
            if len(names) > MAX_NAMES:
                names.clear()
            names.update((k, k.decode("utf-8", "replace")) for k in set(kkeys).difference(names))
            keys = [names[k] for k in kkeys]
        kafka_ms = [ts if kind != 0 else None for kind, ts in stamps]
        if self.clock_kind == "event":
            times = [line_time_ms(line, ms) for line, ms in zip(lines, kafka_ms)]
        else:
            times = kafka_ms
        return Columns(keys, offsets, lines, times, [None] * len(lines), [m.headers() for m in msgs])

    def _one_by_one(self, msgs: list, tp, epoch: int, failed, offsets: list[int],
                    stamps: list[tuple[int, int]]) -> tuple[Columns | None, list]:
        """The poll's records read one at a time, those without a line dead-lettered: (their columns, or None
        when none has a line; the records taken)."""
        rows, taken = [], []
        clock_kind = self.clock_kind
        parse, max_bytes = self._read, self.max_bytes
        plain_keyed = self._kafka_key  # a plain text line keyed by its Kafka key: read inline (`_read`'s first case)
        for m, offset, (ts_kind, ts_ms) in zip(msgs, offsets, stamps):
            value, kkey = m.value(), m.key()
            try:
                if plain_keyed and kkey is not None and value and len(value) <= max_bytes and value[0] < 0x80 \
                        and value[0] not in _NOT_PLAIN and value.isascii():
                    line, key, kind, time_ms = value.decode("ascii").rstrip("\r\n"), kkey.decode("utf-8", "replace"), \
                        None, None
                else:
                    line, key, kind, time_ms = parse(value, kkey)
                kafka_ms = ts_ms if ts_kind != 0 else None
                if clock_kind == "record":
                    time_ms = kafka_ms
                elif time_ms is None:
                    # event time: the line's own stamp; a line without one (a stack frame) moves no clock: it joins
                    # its key's window as the poll rules say, and never mixes the Kafka clock into the line times
                    time_ms = line_time_ms(line, kafka_ms) if clock_kind == "event" else kafka_ms
            except NoLine as err:
                self.dead_letter(tp, epoch, offset, kkey, value, err.error_class, err.message, m.headers())
                continue
            except Exception as exc:  # noqa: BLE001 - routed to `failed` (the guard) or raised
                if failed is None:
                    raise
                failed(m, exc)
                continue
            rows.append((key, offset, line, time_ms, kind, m.headers()))
            taken.append(m)
        return (Columns(*map(list, zip(*rows))) if rows else None), taken

    def due(self, draining: bool) -> list[Doc]:
        return self._docs(self.windows.flush() if draining else self.windows.due())

    def drop(self, tps) -> int:
        return self.windows.drop(list(tps))

    # ---- one record -------------------------------------------------------------------
    def read(self, value: bytes | None, kafka_key: bytes | None) -> Line:
        """(line, key, kind, time) of one record; NoLine when it has no line to window."""
        return Line(*self._read(value, kafka_key))

    def _read(self, value: bytes | None, kafka_key: bytes | None) -> tuple:
        """`read` as a plain tuple; a value that starts with an ASCII byte other than `{` or a space is plain
        text, read without looking for JSON (the common case of a shipper's lines)."""
        b0 = value[:1] if value is not None and len(value) <= self.max_bytes else b"{"
        if b0 < b"\x80" and b0 != b"{" and not b0.isspace():
            try:
                line = value.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                return self._read_any(value, kafka_key)  # not UTF-8: NoLine says where
            if self._kafka_key and kafka_key is not None:
                return line, kafka_key.decode("utf-8", "replace"), None, None
            return line, self._key(None, line, kafka_key, None), None, None
        return self._read_any(value, kafka_key)

    def _read_any(self, value: bytes | None, kafka_key: bytes | None) -> tuple:
        if value is None:
            raise NoLine("null_value", "a record without a value (a tombstone)")
        if len(value) > self.max_bytes:
            raise NoLine("oversize", f"{len(value)} bytes, more than kafka.max_message_bytes ({self.max_bytes})")
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoLine("invalid_utf8", f"not UTF-8 at byte {exc.start}") from None
        obj, kind, source, time_ms = None, None, None, None
        if text[:1] == "{" or (text[:1].isspace() and text.lstrip().startswith("{")):
            try:
                obj = orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                raise NoLine("invalid_json", f"starts with '{{' but is not JSON: {exc}") from None
            record = None if isinstance(obj.get("text"), str) else read_record(obj)
            if record is None and not isinstance(obj.get("text"), str):
                raise NoLine("missing_text", f"a JSON record with none of text, {', '.join(LINE_FIELDS)} as a string")
            line = obj["text"] if record is None else record.text
            if record is not None:
                source, time_ms = record.source, record.time_ms
            kind = obj.get("kind") if isinstance(obj.get("kind"), str) else None
        else:
            line = text
        line = line.rstrip("\r\n")
        return line, self._key(obj, line, kafka_key, source), kind, time_ms

    def _key(self, obj, line: str, kafka_key: bytes | None, source: str | None) -> str:
        """key_field, key_regex, the Kafka key, the shipper's host (or pod, or resource), the syslog header's
        host; else "" (one window per partition)."""
        if self.key_path is not None and isinstance(obj, dict):
            v = obj
            for part in self.key_path:
                v = v.get(part) if isinstance(v, dict) else None
            if v is not None:
                return v if isinstance(v, str) else orjson.dumps(v).decode()
        if self.key_regex is not None:
            m = self.key_regex.search(line)
            if m is not None:
                return m.groupdict().get("key") or (m.group(1) if m.re.groups else m.group(0))
        if kafka_key is not None:
            return kafka_key.decode("utf-8", "replace")
        return source or host_of(line) or ""

    # ---- closed windows ------------------------------------------------------------------
    def _docs(self, closed: list[Window]) -> list[Doc]:
        docs = []
        for w in closed:
            if self.metrics is not None:
                self.metrics.windows_closed.labels(w.reason).inc()
            if not self.tracker.group(w.tp, w.epoch, w.offsets):
                continue  # its partition was revoked meanwhile
            first = w.offsets[0]
            doc_id = f"{w.tp[0]}:{w.tp[1]}:{first}-{w.offsets[-1]}"
            text = w.text()
            meta = {"id": doc_id, "source": w.key or None, "kind": w.first, "attributes": None}
            doc = Doc(w.tp, w.epoch, first, w.key.encode() if w.key else None, doc_id, text, meta,
                      w.closed if w.closed is not None else time.monotonic(), raw=text.encode())
            doc.window = w
            doc.headers = tuple(w.headers or ())   # the headers all its records carry, equal (e.g. a tenant)
            docs.append(doc)
        return docs


DAY_MS = 86_400_000


def line_time_ms(line: str, near_ms: int | None) -> int | None:
    """The timestamp at the start of `line` (worker/digest/timeparse.py), in ms since the epoch; a time without a
    year (RFC 3164) takes the year of `near_ms` (the Kafka timestamp, else now), or the year before when that puts
    it more than a day after `near_ms`. Times without a zone are read as UTC."""
    stamp = parse_line(line)
    if stamp is None:
        return None
    if not stamp.text.startswith("--"):
        return int(stamp.seconds * 1e3)
    year = datetime.fromtimestamp((near_ms if near_ms is not None else time.time() * 1e3) / 1e3, tz=timezone.utc).year
    near = near_ms if near_ms is not None else time.time() * 1e3
    for y in (year, year - 1):  # a line read just after New Year is last year's
        try:
            ms = int(datetime.fromisoformat(f"{y}{stamp.text[1:]}").replace(tzinfo=timezone.utc).timestamp() * 1e3)
        except ValueError:   # 29 February of a year without one
            continue
        if ms <= near + DAY_MS:
            return ms
    return None


def window_info(doc: Doc) -> dict | None:
    """The output's `window` object (worker/messages/models.py WindowInfo) of a window document, else None."""
    w = doc.window
    if w is None:
        return None
    return {"key": w.key, "start": iso_ms(w.first_ts_ms), "end": iso_ms(w.last_ts_ms), "records": w.records,
            "events": w.joiner.event_count, "closed_by": w.reason, "clock": w.clock, "late": w.late,
            "read_start": iso_ms(w.read_first_ms), "read_end": iso_ms(w.read_last_ms),
            "offsets": [{"topic": w.tp[0], "partition": w.tp[1], "first": w.offsets[0], "last": w.offsets[-1]}]}

