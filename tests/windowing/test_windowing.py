"""The window assembly rules with a fake clock, the multiline joins, and the tracker's window groups."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.pipeline.tracker import OffsetTracker, Record
from worker.multiline import joins as continues
from worker.windowing.multiline import Joiner
from worker.windowing.windows import Rules, Windower
from clocks import Clock

TP, TP2 = ("lines", 0), ("lines", 1)


def windower(**kw):
    clock = Clock()
    rules = {"gap_s": 10.0, "max_length_s": 60.0, "max_lines": 100, "max_bytes": 10_000, "max_open_s": 300.0}
    rules.update(kw)
    return Windower(Rules(**rules), clock), clock


def test_gap_closes_a_key_window_and_the_next_record_opens_another():
    w, clock = windower()
    assert w.add(TP, 1, "a", 0, "one") == []
    clock.t += 9.9
    assert w.add(TP, 1, "a", 1, "two") == [] and w.due() == []
    clock.t += 10.0
    (closed,) = w.due()
    assert (closed.key, closed.offsets, closed.reason, closed.text()) == ("a", [0, 1], "gap", "one\ntwo")
    assert w.open_windows == 0 and w.held_bytes == 0
    clock.t += 1
    w.add(TP, 1, "a", 2, "three")
    clock.t += 10
    assert [x.offsets for x in w.due()] == [[2]]


def test_a_record_after_the_gap_closes_the_old_window_itself():
    w, clock = windower()
    w.add(TP, 1, "a", 0, "one")
    clock.t += 11
    (closed,) = w.add(TP, 1, "a", 1, "two")
    assert closed.offsets == [0] and closed.reason == "gap" and w.open_windows == 1


def test_max_length_closes_a_window_that_never_pauses():
    w, clock = windower(max_length_s=30.0)
    for i in range(30):
        assert w.due() == []
        w.add(TP, 1, "a", i, f"line {i}")
        clock.t += 1.0
    (closed,) = w.due()  # 30 s after it opened
    assert closed.reason == "max_length" and closed.offsets == list(range(30))


def test_max_lines_closes_at_the_next_start_of_an_event():
    w, _ = windower(max_lines=3)
    assert [w.add(TP, 1, "a", i, f"line {i}") for i in range(3)] == [[], [], []]
    (closed,) = w.add(TP, 1, "a", 3, "line 3")
    assert closed.reason == "max_lines" and closed.offsets == [0, 1, 2]
    assert w.open_windows == 1


def test_max_bytes_closes_and_a_continuation_is_not_cut_from_its_first_line():
    w, _ = windower(max_bytes=20)
    w.add(TP, 1, "a", 0, "Exception in thread main")  # 25 bytes: full
    assert w.add(TP, 1, "a", 1, "\tat a.B.c(B.java:1)") == []  # still joins its event
    (closed,) = w.add(TP, 1, "a", 2, "next event")
    assert closed.reason == "max_bytes" and closed.offsets == [0, 1]
    assert closed.text() == "Exception in thread main\n\tat a.B.c(B.java:1)"


def test_keys_and_partitions_are_isolated():
    w, clock = windower(max_lines=2)
    w.add(TP, 1, "a", 0, "a0")
    w.add(TP, 1, "b", 1, "b0")
    w.add(TP2, 2, "a", 0, "other partition a0")
    w.add(TP, 1, "a", 2, "a1")
    (closed,) = w.add(TP, 1, "a", 3, "a2")  # only a's window in partition 0 is full
    assert (closed.tp, closed.key, closed.offsets) == (TP, "a", [0, 2])
    clock.t += 10
    by = {(x.tp, x.key): x.offsets for x in w.due()}
    assert by == {(TP, "a"): [3], (TP, "b"): [1], (TP2, "a"): [0]}


def test_one_key_flood_closes_its_own_windows_and_leaves_the_others_alone():
    w, _ = windower(max_lines=10)
    w.add(TP, 1, "quiet", 0, "hello")
    closed = []
    for i in range(1, 1001):
        closed += w.add(TP, 1, "flood", i, f"spam {i}")
    assert {c.key for c in closed} == {"flood"} and len(closed) == 99
    assert w.open_windows == 2 and w.held_bytes < 200


def test_max_open_closes_every_window_of_the_partition_for_a_commit_point():
    w, clock = windower(gap_s=10.0, max_length_s=20.0, max_open_s=30.0)
    w.add(TP2, 2, "other", 0, "y")
    # three keys in turn, each closed by max_length at a different time: without max_open some window
    # of the partition would always be open, so its committed offset could never move
    closed = []
    for i in range(40):
        closed += w.add(TP, 1, f"k{i % 3}", i, "x") + w.due()
        if any(c.reason == "max_open" for c in closed):
            break
        clock.t += 1.0
    assert [c.reason for c in closed if c.tp == TP][:2] == ["max_length", "max_length"]
    assert clock.t - 1000.0 == 30.0  # max_open_s after the partition's first record
    assert {c.key for c in closed if c.reason == "max_open"} == {"k0", "k1", "k2"}
    assert [c.reason for c in closed if c.tp == TP2] == ["gap"]
    assert max(o for c in closed for o in c.offsets if c.tp == TP) == 29
    assert w.open_windows == 1  # the record that found the partition past max_open starts afresh


def test_a_cap_closes_the_oldest_windows_instead_of_waiting_for_their_gap():
    clock = Clock()
    w2 = Windower(Rules(max_windows=3, max_held_bytes=1 << 20), clock)
    assert w2.add(TP, 1, "a", 0, "x") == [] and w2.add(TP2, 1, "b", 0, "x") == []
    clock.t += 1
    w2.add(TP, 1, "a", 1, "y")  # a's window stays the oldest: opened first
    (closed,) = w2.add(TP, 1, "c", 2, "x")  # the third open window reaches max_windows
    assert (closed.key, closed.offsets, closed.reason) == ("a", [0, 1], "max_held")
    assert w2.open_windows == 2 and w2.held_records == 2 and not w2.full()
    w3 = Windower(Rules(max_held_bytes=25), clock)
    assert w3.add(TP, 1, "a", 0, "0123456789") == []
    assert w3.add(TP, 1, "b", 1, "0123456789") == []
    (closed,) = w3.add(TP2, 1, "c", 0, "0123")  # 27 bytes held: a's window goes
    assert closed.key == "a" and w3.held_bytes == 16 and not w3.full()
    assert w3.drop([TP]) == 1 and w3.held_bytes == 5 and w3.held_records == 1 and w3.open_windows == 1


def test_time_paused_is_not_a_gap_but_max_length_still_counts():
    w, clock = windower(gap_s=10.0, max_length_s=45.0)
    w.add(TP, 1, "a", 0, "one")
    clock.t += 4
    w.hold(True)  # ingest paused its partitions: a's next records may wait unread in the topic
    clock.t += 20
    assert w.due() == []  # 24 s without a record, but only 4 s of them reading
    w.hold(False)
    clock.t += 5.9
    assert w.add(TP, 1, "a", 1, "two") == []  # 9.9 s of reading: still the same window
    clock.t += 9.9
    assert w.due() == []
    clock.t += 0.1
    (closed,) = w.due()  # 10 s of reading since its latest record
    assert closed.offsets == [0, 1] and closed.reason == "gap"
    w.add(TP, 1, "b", 2, "x")
    w.hold(True)
    clock.t += 45
    (closed,) = w.due()  # a pause never holds a window past max_length
    assert closed.reason == "max_length"


def test_flush_and_a_new_epoch_drop_the_old_windows():
    w, _ = windower()
    w.add(TP, 1, "a", 5, "old")
    w.add(TP, 2, "a", 5, "again, after a rebalance")  # the partition came back: rebuilt from the commit
    (closed,) = w.flush()
    assert closed.epoch == 2 and closed.offsets == [5] and closed.reason == "flush"


def test_bad_rules_name_the_value():
    with pytest.raises(ValueError, match="gap_s must be > 0, got 0"):
        Rules(gap_s=0)


@pytest.mark.parametrize("line", [
    "\tat org.example.Main.run(Main.java:12)", "    at x", "at org.example.Main.main(Main.java:5)",
    "Caused by: java.io.IOException: boom", "\t... 12 more", "goroutine 1 [running]:", "main.main()",
    "net/http.(*conn).serve(0xc000138000, {0x6e2f28, 0xc0000a8000})", "created by net/http.(*Server).Serve", "",
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x45a1b2]",
])
def test_continuations(line):
    assert continues(line)


@pytest.mark.parametrize("line", [
    "<34>Oct 11 22:14:15 host1 su: 'su root' failed", "panic: runtime error: index out of range",
    "Exception in thread \"main\" java.lang.NullPointerException", "2024-05-01 INFO started",
])
def test_starts(line):
    assert not continues(line)


def test_java_and_go_traces_join_to_their_first_line():
    j = Joiner()
    for line in ["INFO start", "java.lang.IllegalStateException: bad", "\tat a.B.c(B.java:1)",
                 "Caused by: java.io.IOException: io", "\t... 3 more", "panic: boom", "",
                 "goroutine 1 [running]:", "main.main()", "\t/src/main.go:8 +0x1d", "INFO after"]:
        j.add(line)
    assert j.lines == 11 and len(j.events) == 3          # the exception's class line joins the line logging it
    assert j.events[0].count("\n") == 4 and j.events[1].startswith("panic: boom\n\ngoroutine 1")
    off = Joiner(enabled=False)
    for line in ["a", "\tb"]:
        off.add(line)
    assert off.events == ["a", "\tb"]


# ---- the tracker's window groups -------------------------------------------------------------
def rec(name: str) -> Record:
    return Record("out", None, name.encode())


def test_interleaved_windows_commit_only_where_none_straddles():
    t = OffsetTracker()
    e = t.assign(TP)
    for off in range(6):
        t.see(TP, e, off)
    # key a: 0, 2, 4; key b: 1, 3, 5
    assert t.group(TP, e, [0, 2, 4])
    t.complete(TP, e, 0, (rec("a"),))
    assert t.take_ready() == []  # b is open: committing 0 (or 0..4) would lose or repeat records
    assert t.holding() and t.holding()[0][1] == 0
    assert (t.pending(), t.pending_documents()) == (6, 4)  # a closed window is one document, waiting or not
    t.group(TP, e, [1, 3, 5])
    assert t.pending_documents() == 2
    t.complete(TP, e, 1, (rec("b"),))
    (ready,) = t.take_ready()
    assert ready.offsets == tuple(range(6)) and ready.next_offset == 6
    assert [r.value for r in ready.records] == [b"a", b"b"]
    assert t.pending() == t.pending_documents() == 0


def test_a_window_commits_alone_when_it_straddles_nothing_and_a_put_back_run_stays_whole():
    t = OffsetTracker()
    e = t.assign(TP)
    for off in (10, 11, 12, 13):
        t.see(TP, e, off)
    t.group(TP, e, [10, 11])
    t.complete(TP, e, 10, (rec("w1"),))
    t.complete(TP, e, 12, (rec("dead letter"),))
    (ready,) = t.take_ready(max_records=1)
    assert ready.offsets == (10, 11)  # the limit never cuts a window
    t.put_back([ready])
    (again,) = t.take_ready(max_records=1)
    assert again.offsets == (10, 11) and again.records == ready.records
    (rest,) = t.take_ready()
    assert rest.offsets == (12,)  # 13 is unfinished
    assert t.pending_documents() == t.pending() == 1


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=80), st.randoms(use_true_random=False),
       st.sampled_from([None, 1, 3]))
def test_takes_that_remember_their_scan_equal_takes_that_scan_afresh(keys, rnd, max_records):
    """Interleaved windows of up to five keys close and complete in a random order, with takes in between:
    the tracker that goes on from its last scan takes exactly what one that rescans every time takes."""
    fresh, kept = OffsetTracker(), OffsetTracker()
    epochs = (fresh.assign(TP), kept.assign(TP))
    by_key: dict[int, list[int]] = {}
    for off, key in enumerate(keys):
        for t, e in zip((fresh, kept), epochs):
            t.see(TP, e, off)
        by_key.setdefault(key, []).append(off)
    windows = list(by_key.values())
    rnd.shuffle(windows)
    for w in windows:
        for t, e in zip((fresh, kept), epochs):
            t.group(TP, e, w)
            t.complete(TP, e, w[0], (rec(str(w[0])),))
        for _ in range(rnd.randint(0, 2)):
            for p in fresh._parts.values():
                p.scan = None
            taken = fresh.take_ready(max_records)
            assert taken == kept.take_ready(max_records)
            if taken and rnd.random() < 0.3:  # an aborted transaction: the runs go back and out again
                fresh.put_back(taken)
                kept.put_back(taken)
    for p in fresh._parts.values():
        p.scan = None
    assert fresh.take_ready() == kept.take_ready()
    assert fresh.pending() == kept.pending() == 0
