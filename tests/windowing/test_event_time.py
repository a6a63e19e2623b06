"""Windows on record or event time: gap and length by the records' own times, a grace period, late records
counted and kept, the idle rule; headers common to a window's records and its records' trace parents."""

from __future__ import annotations

import pytest

from worker.windowing.windows import MAX_LINKS, Rules, Windower
from clocks import Clock

TP = ("lines", 0)
T0 = 1_714_564_800_000  # ms


def windower(**kw):
    clock = Clock()
    rules = {"gap_s": 10.0, "max_length_s": 60.0, "max_lines": 100, "max_bytes": 10_000, "max_open_s": 3_600.0,
             "time": "event", "grace_s": 5.0, **kw}
    return Windower(Rules(**rules), clock, wall=lambda: clock.t), clock


def test_a_backlog_read_in_one_second_splits_by_the_records_own_gaps():
    """On the worker's clock a backlog is one window; on event time its 30 s silence is a gap."""
    times = [0, 2, 4, 34, 36]
    for mode, expected in (("poll", [[0, 1, 2, 3, 4]]), ("event", [[0, 1, 2], [3, 4]])):
        w, clock = windower(time=mode)
        closed = []
        for off, t in enumerate(times):
            clock.t += 0.01
            closed += w.add(TP, 1, "host-1", off, f"line {off}", T0 + t * 1000)
        closed += w.flush()
        assert [c.offsets for c in closed] == expected, mode
        assert closed[0].clock == mode and closed[0].first_ts_ms == T0


def test_the_watermark_closes_other_keys_windows_and_max_length_runs_on_event_time():
    w, clock = windower()
    w.add(TP, 1, "a", 0, "a0", T0)
    w.add(TP, 1, "b", 1, "b0", T0 + 1_000)
    w.add(TP, 1, "b", 2, "b1", T0 + 9_000)    # watermark T0 + 4 s: a is 4 s behind it, under the gap
    assert w.due() == []
    w.add(TP, 1, "b", 3, "b2", T0 + 15_500)   # watermark T0 + 10.5 s: a's gap has passed in event time
    (a,) = w.due()
    assert (a.key, a.reason, a.offsets) == ("a", "gap", [0])
    closed = []
    for i, t in enumerate(range(20_000, 80_000, 5_000)):
        closed += w.add(TP, 1, "b", 4 + i, f"b{i}", T0 + t)   # b's next record past 60 s opens a new window
    (b,) = closed
    assert b.reason == "max_length" and (b.first_ts_ms, b.last_ts_ms) == (T0 + 1_000, T0 + 60_000)
    for i, t in enumerate(range(80_000, 125_000, 5_000)):   # b's open window: 65 s to 120 s
        assert w.add(TP, 1, "b", 20 + i, f"b{i}", T0 + t) == []
    w.add(TP, 1, "c", 99, "c0", T0 + 131_000)   # watermark T0 + 126 s: b is 61 s long in event time, not silent
    (b,) = w.due()
    assert (b.key, b.reason, b.first_ts_ms, b.last_ts_ms) == ("b", "max_length", T0 + 65_000, T0 + 120_000)


def test_late_records_are_counted_and_kept_in_their_keys_window():
    w, clock = windower()
    w.add(TP, 1, "a", 0, "a0", T0 + 60_000)
    w.add(TP, 1, "a", 1, "a-late", T0 + 50_000)    # 10 s behind the newest: beyond the 5 s grace
    w.add(TP, 1, "a", 2, "a-in-grace", T0 + 57_000)
    w.add(TP, 1, "z", 3, "z-late", T0)            # late, and its key has no window: it opens one
    assert w.late_records == 2
    by_key = {x.key: x for x in w.flush()}
    assert (by_key["a"].offsets, by_key["a"].late) == ([0, 1, 2], 1)
    assert (by_key["z"].offsets, by_key["z"].late) == ([3], 1)


def test_an_idle_partition_closes_on_the_worker_clock_after_gap_plus_grace():
    w, clock = windower()
    w.add(TP, 1, "a", 0, "a0", T0)
    clock.t += 14.9
    assert w.due() == []
    clock.t += 0.2
    (a,) = w.due()
    assert a.reason == "gap"


def test_record_time_without_a_timestamp_takes_the_poll_rules():
    w, clock = windower(time="record")
    w.add(TP, 1, "a", 0, "a0", None)
    clock.t += 10.0
    (a,) = w.due()
    assert (a.reason, a.clock) == ("gap", "poll")


def test_headers_equal_across_the_records_are_kept_and_trace_parents_collected():
    w, clock = windower(time="poll", max_lines=1_000)
    tp = lambda i: ("traceparent", f"00-{i:032x}-{i:016x}-01".encode())  # noqa: E731
    w.add(TP, 1, "a", 0, "a0", headers=[("tenant", b"acme"), ("region", b"eu"), tp(1)])
    w.add(TP, 1, "a", 1, "a1", headers=[("region", b"eu"), ("tenant", b"acme"), ("shard", b"7"), tp(2)])
    w.add(TP, 1, "a", 2, "a2", headers=[("tenant", b"acme"), ("region", b"us"), tp(3)])
    for i in range(3, MAX_LINKS + 10):
        w.add(TP, 1, "a", i, f"a{i}", headers=[("tenant", b"acme"), tp(i + 1)])
    (a,) = w.flush()
    assert a.headers == [("tenant", b"acme")]
    assert a.traceparents[:2] == [tp(1)[1], tp(2)[1]] and len(a.traceparents) == MAX_LINKS


@pytest.mark.parametrize("bad", [{"time": "wall"}, {"grace_s": -1.0}])
def test_bad_rules(bad):
    with pytest.raises(ValueError):
        Rules(**bad)
