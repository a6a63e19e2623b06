"""Continuous batching's policy with a fake engine (no model): slots never overlap, admission is
first come first served within seats, KV rows and the prefill budget, freed seats are refilled, and
each document leaves when it finishes, not when its bin ends."""

from __future__ import annotations

import random

import pytest

from worker.engine.scheduler import Entry, Scheduler
from worker.engine.slots import SlotAllocator


def _largest_gap(live: dict[int, int], capacity: int) -> int:
    """The largest run of rows no live slot holds (the allocator's free space, from the outside)."""
    edges = [(0, 0), *sorted(live.items()), (capacity, 0)]
    return max(b[0] - (a[0] + a[1]) for a, b in zip(edges, edges[1:]))


def test_slots_never_overlap_and_freed_neighbours_merge():
    rng = random.Random(3)
    alloc = SlotAllocator(500)
    live: dict[int, int] = {}  # start -> size
    for _ in range(2_000):
        if live and rng.random() < 0.45:
            start = rng.choice(sorted(live))
            alloc.free(start, live.pop(start))
        else:
            size = rng.randint(1, 60)
            start = alloc.alloc(size)
            if start is None:
                assert _largest_gap(live, 500) < size  # refused only when no free run is large enough
                continue
            live[start] = size
        rows = sorted((s, s + n) for s, n in live.items())
        assert all(a[1] <= b[0] for a, b in zip(rows, rows[1:]))  # disjoint
        assert all(0 <= s and e <= 500 for s, e in rows)
        assert alloc.used == sum(live.values())
    for start, size in list(live.items()):
        alloc.free(start, size)
    assert alloc.alloc(500) == 0  # everything merged back into one interval


def test_a_double_free_or_a_foreign_interval_is_refused():
    alloc = SlotAllocator(100)
    a = alloc.alloc(10)
    alloc.free(a, 10)
    with pytest.raises(ValueError, match="not a slot in use"):
        alloc.free(a, 10)
    with pytest.raises(ValueError, match="not a slot in use"):
        alloc.free(95, 10)


def _entries(lengths, reserve=4):
    return [Entry(i, n, n + reserve) for i, n in enumerate(lengths)]


def test_admission_is_in_order_within_the_prefill_budget_while_decoding():
    s = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=30)
    for e in _entries([10, 10, 10, 10, 50]):
        s.enqueue(e)
    assert [e.item for e in s.admit(decoding=3)] == [0, 1, 2]  # 30 prompt tokens: the budget
    assert [e.item for e in s.admit(decoding=6)] == [3]  # 10 + 50 > 30: the long one waits a step
    assert [e.item for e in s.admit(decoding=7)] == [4]  # longer than the budget: admitted alone
    assert not s.waiting and s.running == 5


def test_with_nothing_decoding_everything_that_fits_is_admitted_and_the_head_is_never_skipped():
    s = Scheduler(seats=3, kv_rows=100, prefill_tokens=8)
    for e in _entries([20, 20, 20, 5]):
        s.enqueue(e)
    got = s.admit(decoding=0)
    assert [e.item for e in got] == [0, 1, 2]  # no budget when idle; three seats
    assert not s.wants_work()
    s.finish(got[0])
    assert not s.wants_work()  # the waiting one takes the freed seat
    assert [e.item for e in s.admit(decoding=2)] == [3]
    s.finish(got[1])
    assert s.wants_work()  # a seat free and nothing waiting: take the next bin
    big = Scheduler(seats=4, kv_rows=60, prefill_tokens=1_000)
    for e in _entries([40, 5, 5]):
        big.enqueue(e)
    first = big.admit(decoding=0)
    assert [e.item for e in first] == [0, 1]  # 44 + 9 rows; the third (9) does not fit in 7
    assert big.admit(decoding=2) == []  # FIFO: nothing passes the head while it waits for rows
    big.finish(first[1])
    assert [e.item for e in big.admit(decoding=1)] == [2]


def test_a_document_larger_than_the_kv_rows_is_refused():
    s = Scheduler(seats=2, kv_rows=50, prefill_tokens=100)
    with pytest.raises(ValueError, match="KV rows"):
        s.enqueue(Entry("x", 60, 64))


def simulate(bins: list[list[tuple[int, int]]], seats: int, kv_rows: int, budget: int, k: int = 4):
    """A fake engine under the scheduler: bins of (prompt, output length) documents; each step admits,
    then every running document generates k tokens (its first at prefill). Returns per document the
    step it left at, the step its bin's last document left at, and the running count per step."""
    s = Scheduler(seats, kv_rows, budget)
    left = {}
    running: list[Entry] = []
    occupancy = []
    queue = [[(b, i, p, out) for i, (p, out) in enumerate(docs)] for b, docs in enumerate(bins)]
    step = 0
    while queue or s.busy:
        while queue and s.wants_work():  # the caller takes the next bin only when it is wanted
            for b, i, p, out in queue.pop(0):
                s.enqueue(Entry({"id": (b, i), "out": out, "made": 0}, p, p + 8))
        for e in s.admit(decoding=len(running)):
            e.item["made"] = 1
            running.append(e)
        rows = sorted((e.start, e.start + e.rows) for e in running)
        assert all(a[1] <= b[0] for a, b in zip(rows, rows[1:])), "KV slots overlap"
        assert sum(e.rows for e in running) <= kv_rows and len(running) <= seats
        occupancy.append(len(running))
        for e in running:
            e.item["made"] = min(e.item["out"], e.item["made"] + k)
        for e in [e for e in running if e.item["made"] >= e.item["out"]]:
            left[e.item["id"]] = step
            running.remove(e)
            s.finish(e)
        step += 1
    return left, occupancy


def test_documents_leave_when_they_finish_and_their_seats_are_refilled():
    rng = random.Random(5)
    bins = [[(rng.randint(5, 40), rng.choice([2, 6, 40, 120])) for _ in range(8)] for _ in range(12)]
    left, occupancy = simulate(bins, seats=8, kv_rows=400, budget=64)
    assert len(left) == 96  # every document exactly once
    early = [(b, i) for b, docs in enumerate(bins) for i, _ in enumerate(docs)
             if left[(b, i)] < max(left[(b, j)] for j in range(len(docs)))]
    assert len(early) > 48  # most documents leave before their bin's last one
    busy = occupancy[: len(occupancy) // 2]  # while the backlog lasts, seats stay taken
    assert sum(busy) / len(busy) > 6.5


def test_while_decoding_waiting_documents_join_in_groups_once_enough_seats_are_free():
    s = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=1_000, refill_seats=4)
    for e in _entries([10] * 14):
        s.enqueue(e)
    group = s.admit(decoding=0)  # nothing decodes: everything that fits goes at once
    assert [e.item for e in group] == list(range(8))
    for e in group[:3]:
        s.finish(e)
    assert s.admit(decoding=5) == []  # 3 free seats < 4: the queue waits for a larger group
    s.finish(group[3])
    assert [e.item for e in s.admit(decoding=4)] == [8, 9, 10, 11]  # 4 free: one prefill of four
    for e in group[4:6]:
        s.finish(e)
    assert [e.item for e in s.admit(decoding=6)] == [12, 13]  # only 2 wait and both fit: no waiting on a group


def test_a_refill_group_larger_than_the_seats_means_all_seats():
    s = Scheduler(seats=4, kv_rows=1_000, prefill_tokens=1_000, refill_seats=99)
    assert s.refill_seats == 4
    with pytest.raises(ValueError, match="refill_seats"):
        Scheduler(seats=4, kv_rows=1_000, prefill_tokens=1_000, refill_seats=0)


def test_a_backlog_waits_for_a_cohort_that_ends_within_merge_steps_then_takes_all_its_seats():
    s = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=1_000, refill_seats=2, merge_steps=4)
    for e in _entries([10] * 8):
        s.enqueue(e)
    first = s.admit(decoding=0)
    for e in first[:4]:
        s.finish(e)  # 4 free, 4 still decode
    for e in _entries([10] * 12):
        s.enqueue(e)  # a backlog: 12 wait for 4 seats
    assert s.admit(decoding=4, ends_within=4) == []  # the 4 running end within merge_steps: wait for them
    assert len(s.admit(decoding=4, ends_within=5)) == 4  # they do not: the free seats refill now
    for e in first[4:]:
        s.finish(e)
    assert len(s.admit(decoding=4, ends_within=None)) == 4  # unknown ends: no wait


def test_documents_that_all_fit_are_never_held_for_a_merge():
    s = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=1_000, refill_seats=2, merge_steps=4)
    for e in _entries([10] * 8):
        s.enqueue(e)
    for e in s.admit(decoding=0)[:4]:
        s.finish(e)
    for e in _entries([10] * 4):
        s.enqueue(e)  # 4 wait, 4 seats free: no backlog
    assert len(s.admit(decoding=4, ends_within=0)) == 4
    off = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=1_000, refill_seats=2)  # merge_steps 0: off
    for e in _entries([10] * 12):
        off.enqueue(e)
    for e in off.admit(decoding=0)[:4]:
        off.finish(e)
    assert len(off.admit(decoding=4, ends_within=0)) == 4


def test_while_the_running_cohort_ends_the_next_bin_is_wanted_for_all_seats():
    s = Scheduler(seats=8, kv_rows=1_000, prefill_tokens=1_000, refill_seats=2, merge_steps=4)
    for e in _entries([10] * 10):
        s.enqueue(e)
    s.admit(decoding=0)  # 8 run, 2 wait
    assert not s.wants_work() and s.wants_work(ending=True)  # 2 < 8 seats once the cohort leaves
    for e in _entries([10] * 6):
        s.enqueue(e)
    assert not s.wants_work(ending=True)  # 8 wait: a cohort's worth
