"""Concurrency: several submitting threads and one consumer, cancel and close under load."""

import itertools
import threading
import time

import numpy as np
import pytest

from worker.packer import Packer, PackerConfig

N_SEQS = 3000
BUDGET = 2048


def sequences(seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 50_000, int(n), dtype=np.int32) for n in rng.integers(1, 700, N_SEQS)]


def consume(p: Packer, want: int, out: dict, bins: list, timeout_s: float = 30.0) -> None:
    """Takes bins until `want` sequences came out; records tokens per seq_id."""
    got = 0
    while got < want:
        b = p.next_bin(timeout_s)
        if b is None:
            return
        cu = b.cu_seqlens.tolist()
        assert cu[0] == 0 and all(x < y for x, y in itertools.pairwise(cu))
        bins.append((b.weight, len(b.seq_ids), b.num_tokens, len(b.tokens)))
        for i, sid in enumerate(b.seq_ids.tolist()):
            assert sid not in out, f"sequence {sid} came out twice"
            out[sid] = b.tokens[cu[i] : cu[i + 1]].copy()
            got += 1
        p.release(b.slot)


def run(threads: int, seqs: list[np.ndarray]) -> tuple[dict, list]:
    p = Packer(PackerConfig(budget=BUDGET, reserve_per_seq=16, max_seqs=32, efficient_tokens=1500, max_wait_s=0.002,
                            slots=3, order="decreasing"))
    out: dict[int, np.ndarray] = {}
    bins: list = []
    consumer = threading.Thread(target=consume, args=(p, len(seqs), out, bins))
    consumer.start()

    def produce(k: int) -> None:
        for sid in range(k, len(seqs), threads):
            p.submit(sid, seqs[sid], key=k)

    producers = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(60)
    consumer.join(60)
    assert not consumer.is_alive()
    p.close()
    return out, bins


@pytest.fixture(scope="module")
def single_threaded():
    seqs = sequences()
    return seqs, run(1, seqs)


@pytest.mark.parametrize("threads", [1, 4, 7])
def test_threads_match_the_single_threaded_run(threads, single_threaded):
    seqs, (ref_out, _) = single_threaded
    out, bins = run(threads, seqs) if threads > 1 else single_threaded[1]
    assert sorted(out) == list(range(N_SEQS)) == sorted(ref_out)
    for sid, toks in out.items():
        assert np.array_equal(toks, seqs[sid]), sid  # unaltered
        assert np.array_equal(toks, ref_out[sid])
    for weight, n, num_tokens, padded in bins:
        assert weight <= BUDGET and n <= 32
        assert padded % 16 == 0 and padded - num_tokens < 16


def test_cancel_under_load_drops_exactly_the_returned_ids():
    seqs = sequences(3)
    p = Packer(PackerConfig(budget=BUDGET, reserve_per_seq=0, max_seqs=32, efficient_tokens=1500, max_wait_s=0.002,
                            slots=2, order="decreasing"))
    out: dict[int, np.ndarray] = {}
    bins: list = []
    cancelled: list[int] = []
    stop = threading.Event()

    def consumer():
        while not stop.is_set() or p.stats().pending_seqs:
            consume(p, 1, out, bins, timeout_s=0.05)

    def produce(k: int) -> None:
        for sid in range(k, N_SEQS, 4):
            p.submit(sid, seqs[sid], key=k)
            if k == 0 and sid % 400 == 0:
                cancelled.extend(p.cancel(1))  # another thread's key, mid-stream

    c = threading.Thread(target=consumer)
    c.start()
    producers = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(60)
    stop.set()
    c.join(60)
    p.close()
    assert not set(cancelled) & set(out), "a cancelled sequence was emitted"
    assert len(cancelled) == len(set(cancelled))
    assert set(cancelled) | set(out) == set(range(N_SEQS))
    assert all(sid % 4 == 1 for sid in cancelled)
    assert p.stats().cancelled_seqs == len(cancelled)


def test_close_under_load_wakes_the_consumer_and_stops_producers():
    # A huge bin that never fills within the test: the window holds everything back.
    p = Packer(PackerConfig(budget=2**21, reserve_per_seq=0, max_seqs=2**19, efficient_tokens=2**21, max_wait_s=600.0,
                            latency_target_s=1200.0, slots=2, order="decreasing"))
    errors: list[BaseException] = []
    results: list = []
    stop = threading.Event()  # only for a failing test: stops the producers

    def produce(k: int) -> None:
        try:
            for sid in range(k, 10**9, 4):
                if stop.is_set():
                    return
                p.submit(sid, [1, 2, 3], key=k)
        except RuntimeError as e:  # submit after close
            errors.append(e)

    def consumer():
        results.append(p.next_bin(120.0))

    def wait_for(cond, what: str) -> None:
        end = time.monotonic() + 30
        while not cond():
            if time.monotonic() > end:
                stop.set()
                p.close()
                pytest.fail(f"timed out waiting for {what}: {p.stats()}")
            time.sleep(0.005)

    producers = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in producers:
        t.start()
    try:
        # 2**21 tokens within 600 s needs ~3.5k tokens/s: at a faster stream the window waits.
        wait_for(lambda: p.stats().arrival_rate_tokens_per_s > 10_000, "a fast stream")
        c = threading.Thread(target=consumer)
        c.start()
        wait_for(lambda: p.stats().waits >= 1 or results, "the window to hold the bin")
        assert not results, "the bin was not held back"
        p.close()
        for t in [*producers, c]:
            t.join(30)
    finally:
        stop.set()
        p.close()
    assert not any(t.is_alive() for t in [*producers, c])
    assert results == [None]
    assert len(errors) == 4 and all("close" in str(e) for e in errors)
