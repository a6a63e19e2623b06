"""A poll's records taken together (Windower.add_many, LineStream.add_many, tracker.see_many): the same windows,
offsets and dead letters as one record at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from clocks import Clock
from ingest_fakes import LineMsg
from worker.config.settings import load_settings
from worker.observability.metrics import observe_ages, observe_many
from worker.pipeline.configs import ingest_config
from worker.pipeline.lines import LineStream, NoLine, line_time_ms
from worker.pipeline.tracker import OffsetTracker
from worker.windowing.multiline import Joiner
from worker.windowing.windows import Rules, Windower

TP = ("lines", 0)
LINES = ("INFO start", "\tat a.B.c(B.java:1)", "Caused by: x", "", "main.main()", "ERROR disk full", "é ünïcode")


def _windows(closed) -> list[tuple]:
    return [(w.key, w.offsets, w.reason, w.text(), w.first_ts_ms, w.last_ts_ms, w.late, w.joiner.event_count,
             w.records, w.size, w.headers) for w in closed]


row = st.tuples(st.sampled_from("abc"), st.sampled_from(LINES), st.one_of(st.none(), st.integers(0, 30_000)),
                st.sampled_from([None, [("tenant", b"t")], [("tenant", b"u")]]))


@settings(max_examples=150, deadline=None)
@given(polls=st.lists(st.tuples(st.floats(0, 4), st.lists(row, max_size=8)), max_size=8),
       time=st.sampled_from(["poll", "record"]), multiline=st.booleans())
def test_a_poll_taken_at_once_closes_the_same_windows_as_its_records_one_by_one(polls, time, multiline):
    rules = Rules(gap_s=3.0, max_length_s=8.0, max_lines=3, max_bytes=60, max_open_s=10.0, max_windows=2,
                  max_held_bytes=150, multiline=multiline, time=time, grace_s=1.0)
    one_clock, many_clock = Clock(), Clock()
    one, many = Windower(rules, one_clock, wall=lambda: 1.0), Windower(rules, many_clock, wall=lambda: 1.0)
    offset = 0
    for step, rows in polls:
        one_clock.t += step
        many_clock.t += step
        batch = []
        for key, line, ts, headers in rows:
            batch.append((key, offset, line, ts, None, headers))
            offset += 1
        singly = [w for r in batch for w in one.add(TP, 1, *r)]
        assert _windows(many.add_many(TP, 1, batch)) == _windows(singly)
        assert _windows(many.due()) == _windows(one.due())
        assert (many.open_windows, many.held_bytes, many.held_records, many.late_records) == \
            (one.open_windows, one.held_bytes, one.held_records, one.late_records)
    assert _windows(many.flush()) == _windows(one.flush())


def test_a_failing_row_is_reported_and_the_others_are_windowed():
    w = Windower(Rules(), Clock())
    failures = []
    closed = w.add_many(TP, 1, [("a", 0, "one", None, None, None), ("a", 1, None, None, None, None),
                                ("a", 2, "three", None, None, None)], lambda i, exc: failures.append((i, type(exc))))
    assert closed == [] and failures == [(1, AttributeError)]
    (win,) = w.flush()
    assert win.offsets == [0, 2] and win.text() == "one\nthree"


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.sampled_from(LINES)), max_size=12), enabled=st.booleans())
def test_lines_appended_sort_into_the_same_events_as_lines_added(ops, enabled):
    added, mixed = Joiner(enabled), Joiner(enabled)
    for tell, line in ops:
        added.add(line)
        if tell:
            mixed.add(line)
        else:
            mixed.append(line)
    assert (mixed.events, mixed.event_count, mixed.lines) == (added.events, added.event_count, added.lines)


@given(offsets=st.lists(st.integers(0, 40), max_size=20), cut=st.integers(0, 20))
def test_see_many_registers_what_see_would(offsets, cut):
    one, many = OffsetTracker(), OffsetTracker()
    e1, e2 = one.assign(TP), many.assign(TP)
    first, rest = offsets[:cut], offsets[cut:]
    assert many.see_many(TP, e2, first) == [one.see(TP, e1, o) for o in first]
    assert many.see_many(TP, e2, rest) == [one.see(TP, e1, o) for o in rest]
    assert many.see_many(TP, e2 + 1, [99]) == [False] and many.see_many(("other", 0), e2, [1]) == [False]
    assert many.progress(TP) == one.progress(TP) and many.pending() == one.pending()
    for o in sorted(set(offsets)):
        one.complete(TP, e1, o, ())
        many.complete(TP, e2, o, ())
    assert [r.offsets for r in many.take_ready()] == [r.offsets for r in one.take_ready()]


def test_observe_many_counts_as_observe_does():
    one, many = CollectorRegistry(), CollectorRegistry()
    h1 = Histogram("age_seconds", "a", registry=one, buckets=(0.1, 1, 10))
    h2 = Histogram("age_seconds", "a", registry=many, buckets=(0.1, 1, 10))
    values = [0.0, 0.1, 0.10001, 0.5, 1.0, 3, 10, 11, 1e9]
    for v in values:
        h1.observe(v)
    observe_many(h2, values)
    observe_many(h2, [])
    samples = [[(s.name, s.labels, s.value) for m in r.collect() for s in m.samples if not s.name.endswith("_created")]
               for r in (one, many)]
    assert samples[0] == samples[1]


@given(stamps=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(999_000, 1_001_000)), max_size=30))
def test_observe_ages_counts_as_observe_does_for_each_age(stamps):
    one, many = CollectorRegistry(), CollectorRegistry()
    h1 = Histogram("age_seconds", "a", registry=one, buckets=(0.1, 1, 10, 100))
    h2 = Histogram("age_seconds", "a", registry=many, buckets=(0.1, 1, 10, 100))
    wall = 1_000.5
    for kind, ts in stamps:
        if kind != 0:
            h1.observe(max(0.0, wall - ts / 1e3))
    observe_ages(h2, wall, stamps)
    samples = [{(s.name, tuple(s.labels.items())): s.value for m in r.collect() for s in m.samples
                if not s.name.endswith("_created")} for r in (one, many)]
    assert samples[0].keys() == samples[1].keys()
    for k, v in samples[0].items():
        assert samples[1][k] == pytest.approx(v, abs=1e-6)


def Msg(value, offset, key=b"k", ts=1_700_000_000_000) -> LineMsg:  # noqa: N802 - reads as the record it makes
    return LineMsg(value, key, offset, ts)


def test_a_poll_of_lines_dead_letters_only_its_bad_records_and_windows_the_rest():
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "lines"})
    tracker, dead, failed = OffsetTracker(), [], []
    ls = LineStream(ingest_config(s, None), tracker=tracker, dead_letter=lambda *a: dead.append(a), clock=lambda: 5.0)
    epoch = tracker.assign(TP)
    msgs = [Msg(b"plain one\r\n", 0), Msg(None, 1), Msg(b"ok \xff", 2), Msg(b'{"message": "json two"}', 3, key=None),
            Msg(b"{broken", 4), Msg(b" {\"text\": \"spaced\"}", 5, key=None), Msg(b"last", 6, key=None)]
    assert tracker.see_many(TP, epoch, [m.offset() for m in msgs]) == [True] * 7
    assert ls.add_many(msgs, TP, epoch, lambda m, exc: failed.append(m.offset())) == []
    assert [(d[2], d[5]) for d in dead] == [(1, "null_value"), (2, "invalid_utf8"), (4, "invalid_json")]
    assert "at byte 3" in dead[1][6] and failed == []
    docs = ls.due(True)
    assert sorted((d.window.offsets, d.meta["source"], d.text) for d in docs) == [
        ([0], "k", "plain one"), ([3, 5, 6], None, "json two\nspaced\nlast")]


def test_a_poll_of_lines_reads_each_record_as_read_does():
    """The poll's own reading of plain lines (a Kafka key, ASCII) and `read` give every record the same line
    and key, whatever its first byte or encoding."""
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "lines"})
    values = [b"plain\r\n", b"", b" lead", b"\tTab", b"{\"text\": \"j\"}", "héllo wörld".encode(), b"x\n\n",
              b"<34>Oct 11 22:14:15 host su: 'su root' failed", b"\x7fdel", b"1 2 3"]
    keys = [b"k1", b"k2", None]
    for key in keys:
        tracker = OffsetTracker()
        ls = LineStream(ingest_config(s, None), tracker=tracker, dead_letter=lambda *a: None, clock=lambda: 5.0)
        epoch = tracker.assign(TP)
        msgs = [Msg(v, i, key=key) for i, v in enumerate(values)]
        tracker.see_many(TP, epoch, [m.offset() for m in msgs])
        ls.add_many(msgs, TP, epoch)
        windows = {w.key: w for w in ls.windows.flush()}
        got = [(k, line) for k, w in windows.items() for line in w.joiner._lines]
        want = []
        for v in values:
            r = ls.read(v, key)
            want.append((r.key, r.line))
        assert sorted(got) == sorted(want)


def _read(ls: LineStream, m):
    """The record's Line, or None when it is dead-lettered (no line: NoLine)."""
    try:
        return ls.read(m.value(), m.key())
    except NoLine:
        return None


PLAIN = [b"plain", b"crlf\r\n", b"lf\n", b"", b"in\nside", b"nul\x00byte", b"<34>Oct 11 22:14:15 host su: failed",
         b"1 2 3", b"x\r", b"{\"text\": \"j\"}", b" lead", "héllo".encode(), b"\x0bvt", b"\tat a.B(B.java:1)",
         b" \x1c{\"text\": \"k\"}", b"\x1c{x", b"\t", b"\n"]


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.sampled_from(PLAIN), min_size=1, max_size=12), keys=st.lists(st.sampled_from([b"k1", b"k2"]),
       min_size=12, max_size=12), clock=st.sampled_from(["poll", "record", "event"]))
def test_a_poll_of_plain_lines_read_at_once_gives_each_record_what_read_does(values, keys, clock):
    """A poll read at once (`LineStream._plain`, every record plain ASCII under a Kafka key) or, when one record is
    not, one by one: each record's line, key and time are those `read` and the clock give it."""
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "lines",
                               "RIBBON_WINDOWING__TIME": clock})
    tracker = OffsetTracker()
    ls = LineStream(ingest_config(s, None), tracker=tracker, dead_letter=lambda *a: None, clock=lambda: 5.0)
    epoch = tracker.assign(TP)
    msgs = [Msg(v, i, key=k) for i, (v, k) in enumerate(zip(values, keys))]
    tracker.see_many(TP, epoch, [m.offset() for m in msgs])
    ls.add_many(msgs, TP, epoch)
    got = sorted((k, o, line) for k, w in ((w.key, w) for w in ls.windows.flush())
                 for o, line in zip(w.offsets, w.joiner._lines))
    want = sorted((r.key, m.offset(), r.line) for m in msgs for r in [_read(ls, m)] if r is not None)
    assert got == want
    plain = ls._plain(msgs, [m.offset() for m in msgs], [m.timestamp() for m in msgs])
    simple = all(v.isascii() and b"\x00" not in v and not v.startswith(b"{") and not (v[:1].isspace() and
                 v.decode().lstrip().startswith("{")) for v in values)
    assert (plain is not None) == simple
    if plain is not None:
        assert plain.lines == [ls.read(m.value(), m.key()).line for m in msgs]
        assert plain.times == [line_time_ms(line, m.timestamp()[1]) if clock == "event" else m.timestamp()[1]
                               for line, m in zip(plain.lines, msgs)]
