"""The windower's batch path on the poll clock (worker/windowing/bulk.py): a poll's records taken per key, by
slices, close the same windows, in the same order, with the same state, as the records taken one by one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clocks import Clock
from worker.windowing.bulk import Columns
from worker.windowing.windows import Rules, Windower

TP = ("lines", 0)
LINES = ("INFO start", "\tat a.B.c(B.java:1)", "Caused by: x", "", "main.main()", "ERROR disk full", "é ünïcode",
         "a longer line of text that takes more of the window's bytes than the others do")
TRACE = ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
HEADERS = [None, [], [("tenant", b"t")], [("tenant", b"u")], [("tenant", b"t"), TRACE]]


def _state(w: Windower, closed) -> tuple:
    windows = [(x.key, x.offsets, x.reason, x.text(), x.first_ts_ms, x.last_ts_ms, x.joiner.event_count, x.size,
                x.headers, x.traceparents, x.first, x.opened, x.last, x.read_first_ms, x.read_last_ms)
               for x in closed]
    open_ = [(tp, k, x.offsets, x.size, x.headers) for (tp, k), x in w._order.items()]
    per_tp = {tp: list(ws) for tp, ws in w._open.items()}
    return windows, open_, per_tp, w._since, w.held_bytes, w.held_records


row = st.tuples(st.sampled_from("abcde"), st.sampled_from(LINES), st.one_of(st.none(), st.integers(0, 30_000)),
                st.sampled_from(HEADERS), st.sampled_from([None, "syslog"]))


@settings(max_examples=200, deadline=None)
@given(polls=st.lists(st.tuples(st.floats(0, 4), st.booleans(), st.booleans(), st.lists(row, max_size=40)),
                      max_size=10),
       multiline=st.booleans(), max_lines=st.integers(1, 12), max_bytes=st.integers(1, 400))
def test_a_poll_taken_by_slices_matches_its_records_one_by_one(polls, multiline, max_lines, max_bytes):
    rules = Rules(gap_s=3.0, max_length_s=8.0, max_lines=max_lines, max_bytes=max_bytes, max_open_s=10.0,
                  multiline=multiline)
    one_clock, many_clock = Clock(), Clock()
    one = Windower(rules, one_clock, wall=lambda: one_clock.t + 100)
    many = Windower(rules, many_clock, wall=lambda: many_clock.t + 100)
    offset = 0
    for step, paused, due, rows in polls:
        for c in (one_clock, many_clock):
            c.t += step
        one.hold(paused)
        many.hold(paused)
        batch = []
        for key, line, ts, headers, kind in rows:
            batch.append((key, offset, line, ts, kind, headers))
            offset += 1
        singly = [w for r in batch for w in one.add(TP, 1, *r)]
        assert _state(many, many.add_many(TP, 1, batch)) == _state(one, singly)
        if due:  # else time closes a window at its key's next record
            assert _state(many, many.due()) == _state(one, one.due())
    assert _state(many, many.flush()) == _state(one, one.flush())


def test_a_poll_under_the_caps_is_taken_by_slices_and_one_that_could_reach_them_one_by_one(monkeypatch):
    rules = Rules(max_lines=3, max_windows=4, max_held_bytes=1_000)
    w = Windower(rules, Clock())
    taken = []
    rows_path = w._add_rows
    monkeypatch.setattr(w, "_add_rows", lambda *a: taken.append(len(a[2])) or rows_path(*a))
    cols = Columns(["a", "b", "a", "a", "a"], [0, 1, 2, 3, 4], ["x"] * 5, [None] * 5, [None] * 5, [None] * 5)
    closed = w.add_columns(TP, 1, cols)
    assert taken == [] and [(x.key, x.offsets, x.reason) for x in closed] == [("a", [0, 2, 3], "max_lines")]
    # two keys not open yet with three open: four windows could be open at once, the cap
    cols = Columns(["c", "d"], [5, 6], ["y", "y"], [None] * 2, [None] * 2, [None] * 2)
    closed = w.add_columns(TP, 1, cols)
    assert taken == [2] and [(x.key, x.reason) for x in closed] == [("b", "max_held")] and w.open_windows == 3


@pytest.mark.parametrize("bad", [None, 7])
def test_a_row_without_a_str_line_is_told_to_failed_and_the_others_are_windowed(bad):
    w = Windower(Rules(), Clock())
    failures = []
    cols = Columns(["a", "a", "a"], [0, 1, 2], ["one", bad, "three"], [None] * 3, [None] * 3, [None] * 3)
    assert w.add_columns(TP, 1, cols, lambda i, exc: failures.append(i)) == []
    assert failures == [1]
    (win,) = w.flush()
    assert win.offsets == [0, 2] and win.text() == "one\nthree"
