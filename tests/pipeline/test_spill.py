"""Large dead-letter values wait on disk (worker/pipeline/spill.py); a transaction takes a bounded share of bytes."""

from __future__ import annotations

import gc
import os
import threading

from worker.pipeline.spill import Spilled, Spool
from worker.pipeline.tracker import OffsetTracker, Record

TP = ("in", 0)


def test_large_values_spill_small_ones_stay_and_both_read_back_exactly():
    spool = Spool(threshold=1000)
    small, big = b"s" * 999, os.urandom(5000)
    assert spool.hold(small) is small and spool.hold(None) is None
    held = spool.hold(big)
    assert isinstance(held, Spilled) and len(held) == 5000 and held.read() == big
    assert spool.held_bytes == 5000
    assert Spool(threshold=0).hold(big) is big  # 0: spilling is off


def test_space_is_given_back_once_nothing_waits():
    spool = Spool(threshold=10)
    values = [os.urandom(100 + i) for i in range(20)]
    held = [spool.hold(v) for v in values]
    assert os.fstat(spool._fd).st_size == sum(map(len, values))
    del held[:10]
    gc.collect()
    assert spool.held_bytes == sum(map(len, values[10:])) and [h.read() for h in held] == values[10:]
    held.clear()
    gc.collect()
    assert spool.held_bytes == 0 and os.fstat(spool._fd).st_size == 0  # truncated
    again = spool.hold(b"x" * 50)
    assert again.read() == b"x" * 50


def test_holding_and_dropping_from_two_threads():
    spool = Spool(threshold=1)
    kept: list[tuple[bytes, Spilled]] = []
    lock = threading.Lock()

    def work(seed: int) -> None:
        for i in range(300):
            v = bytes([seed]) * (1 + i % 50)
            h = spool.hold(v)
            if i % 3 == 0:
                with lock:
                    kept.append((v, h))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert all(h.read() == v for v, h in kept)
    assert spool.held_bytes == sum(len(v) for v, _ in kept)


def test_one_transaction_takes_a_bounded_share_of_bytes():
    t = OffsetTracker()
    e = t.assign(TP)
    for off in range(10):
        assert t.see(TP, e, off)
        t.complete(TP, e, off, (Record("dlq", None, b"v" * 400),))
    sizes = []
    while batch := t.take_ready(max_bytes=1000):
        sizes.append(sum(r.size for run in batch for r in run.records))
    assert sizes == [800, 800, 800, 800, 800]
    t.see(TP, e, 10)
    t.complete(TP, e, 10, (Record("dlq", None, b"v" * 5000),))
    (run,) = t.take_ready(max_bytes=1000)  # one record larger than the share still goes, alone
    assert run.offsets == (10,)
