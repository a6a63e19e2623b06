"""The offset tracker: commit only complete prefixes of the offsets actually seen."""

from __future__ import annotations


from hypothesis import given, settings
from hypothesis import strategies as st

from worker.pipeline.tracker import OffsetTracker, Record

TP = ("in", 0)


def rec(off: int) -> tuple[Record, ...]:
    return (Record("out", None, str(off).encode()),)


def test_out_of_order_results_wait_for_the_head():
    t = OffsetTracker()
    e = t.assign(TP)
    for off in (3, 7, 8, 12):  # gaps: offsets are not contiguous
        assert t.see(TP, e, off)
    t.complete(TP, e, 8, rec(8))
    t.complete(TP, e, 7, rec(7))
    assert t.take_ready() == []
    assert t.waiting() == 2
    t.complete(TP, e, 3, rec(3))
    (r,) = t.take_ready()
    assert r.offsets == (3, 7, 8) and r.next_offset == 9
    assert [x.value for x in r.records] == [b"3", b"7", b"8"]
    assert t.pending() == 1  # 12 still in flight


def test_stale_epoch_results_are_dropped():
    t = OffsetTracker()
    old = t.assign(TP)
    t.see(TP, old, 0)
    t.revoke(TP)
    new = t.assign(TP)
    assert new != old
    assert not t.complete(TP, old, 0, rec(0))
    assert not t.see(TP, old, 1)
    assert t.take_ready() == []


def test_put_back_restores_order_and_records():
    t = OffsetTracker()
    e = t.assign(TP)
    for off in (1, 2, 5):
        t.see(TP, e, off)
        t.complete(TP, e, off, rec(off))
    taken = t.take_ready(max_records=2)
    assert taken[0].offsets == (1, 2)
    t.put_back(taken)
    again = t.take_ready()
    assert again[0].offsets == (1, 2, 5)
    assert [x.value for x in again[0].records] == [b"1", b"2", b"5"]


def test_a_rewound_offset_is_not_tracked_twice():
    t = OffsetTracker()
    e = t.assign(TP)
    assert t.see(TP, e, 4)
    assert not t.see(TP, e, 4)
    assert not t.see(TP, e, 2)
    assert t.pending() == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=60), st.randoms(use_true_random=False),
       st.lists(st.booleans(), min_size=1, max_size=60))
def test_every_offset_commits_once_in_order(gaps, rnd, aborts):
    """Whatever the completion order and however many transactions abort, every seen offset
    goes out exactly once, in order, and the committed offset never runs past an unfinished one."""
    t = OffsetTracker()
    e = t.assign(TP)
    offsets, off = [], 0
    for g in gaps:
        off += g
        offsets.append(off)
        t.see(TP, e, off)
    order = offsets[:]
    rnd.shuffle(order)
    out: list[bytes] = []
    committed = 0
    done: set[int] = set()
    for i, o in enumerate(order):
        t.complete(TP, e, o, rec(o))
        done.add(o)
        ready = t.take_ready(max_records=rnd.randint(1, 5))
        if ready and aborts[i % len(aborts)]:
            t.put_back(ready)
            continue
        for r in ready:
            assert all(x in done for x in offsets if x < r.next_offset)
            out.extend(x.value for x in r.records)
            committed = r.next_offset
    for r in t.take_ready():
        out.extend(x.value for x in r.records)
        committed = r.next_offset
    assert out == [str(o).encode() for o in offsets]
    assert committed == offsets[-1] + 1


def test_put_back_names_the_runs_of_a_partition_revoked_meanwhile():
    t = OffsetTracker()
    e = t.assign(TP)
    t.see(TP, e, 1)
    t.complete(TP, e, 1, rec(1))
    taken = t.take_ready()
    t.assign(TP)  # a new epoch: the taken run is no longer this assignment's
    assert t.put_back(taken) == taken and t.take_ready() == []


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 80), st.integers(1, 6), st.integers(1, 12), st.randoms(use_true_random=False),
       st.lists(st.booleans(), min_size=1, max_size=40))
def test_windows_commit_whole_and_once_whatever_the_order(n, keys, size, rnd, aborts):
    """Interleaved windows (groups of offsets of random keys, closed at `size` records or at the end),
    completed in any order, taken under random record and byte limits with aborts: every offset commits
    once and in order, a run never ends inside a window, each output goes out once, with its window."""
    t = OffsetTracker()
    e = t.assign(TP)
    offsets = sorted(rnd.sample(range(3 * n), n))
    t.see_many(TP, e, offsets)
    open_: dict[int, list[int]] = {}
    windows: list[list[int]] = []
    for off in offsets:
        k = rnd.randrange(keys)
        open_.setdefault(k, []).append(off)
        if len(open_[k]) == size:
            windows.append(open_.pop(k))
    windows += open_.values()
    for w in windows:
        assert t.group(TP, e, w)
    assert t.pending_documents() == len(windows)
    owner = {o: w[0] for w in windows for o in w}
    rnd.shuffle(windows)
    taken: list[int] = []
    outs: list[bytes] = []
    for i, w in enumerate([*windows, None]):
        if w is not None:
            t.complete(TP, e, w[0], rec(w[0]))
        ready = t.take_ready(max_records=rnd.randint(1, 3), max_bytes=rnd.choice([None, 1, 4]))
        if ready and w is not None and aborts[i % len(aborts)]:
            t.put_back(ready)
            continue
        while ready:
            for r in ready:
                ends = r.offsets[-1]
                assert all(max(x for x in offsets if owner[x] == owner[o]) <= ends for o in r.offsets)
                taken.extend(r.offsets)
                outs.extend(x.value for x in r.records)
            ready = t.take_ready(max_records=rnd.randint(1, 3)) if w is None else []
    assert taken == offsets
    assert outs == [str(o).encode() for o in sorted(owner[x] for x in offsets if owner[x] == x)]
    assert t.pending() == 0 and t.pending_documents() == 0 and t.waiting() == 0
