"""The preprocessing pool (worker/pipeline/preprocess.py): same results as on the calling thread, in order;
a broken pool stops the worker with a clear error."""

from __future__ import annotations

import os
import signal

import pytest

from worker.digest.prepared import PrepareOptions, prepare_many
from worker.demo.samples import mixed_corpus
from worker.pipeline.preprocess import InOrder, PreprocessError, Preprocessor, _slices, auto_processes

OPTIONS = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True)


def test_auto_is_no_pool_on_small_machines_and_a_few_processes_on_many_cores():
    assert [auto_processes(None, c) for c in (1, 2, 4, 7, 8, 16, 64, 128)] == [0, 0, 0, 0, 2, 4, 8, 8]
    assert auto_processes(3, 2) == 3 and auto_processes(0, 128) == 0


def test_slices_cover_the_batch_in_order_with_about_equal_bytes():
    for sizes, n in (([5] * 10, 3), ([100, 1, 1, 1], 2), ([7], 4), ([1, 2, 3, 4, 5, 6, 7], 7)):
        cuts = _slices(sizes, n)
        assert len(cuts) <= n and cuts[0][0] == 0 and cuts[-1][1] == len(sizes)
        assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:])) and all(a < b for a, b in cuts)
    assert _slices([5] * 9, 3) == [(0, 3), (3, 6), (6, 9)]


def test_the_pool_returns_what_the_calling_thread_computes_in_order_then_a_killed_process_is_an_error():
    docs = mixed_corpus(40, seed=7)
    texts = ["\n".join(d["lines"]) for d in docs]
    sources, kinds = [d["source"] for d in docs], [d["kind"] for d in docs]
    here = prepare_many(texts, sources, kinds, OPTIONS)
    pool = Preprocessor(2, OPTIONS)
    try:
        got = pool.run(texts, sources, kinds)
        strip = lambda ps: [(p.digest, p.highlights, p.prompt, p.summary, p.error) for p in ps]  # noqa: E731
        assert strip(got) == strip(here)
        assert any(p.prompt is not None for p in got) and all(p.seconds > 0 for p in got)
        for pid in list(pool._pool._processes):  # a process dies (OOM killer, say)
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(PreprocessError, match="preprocessing pool broke"):
            pool.run(texts, sources, kinds)
    finally:
        pool.close()


def test_in_order_gives_batches_back_in_submission_order_and_waits_beyond_its_depth():
    docs = mixed_corpus(30, seed=9)
    texts = ["\n".join(d["lines"]) for d in docs]
    here = prepare_many(texts, [None] * 30, [None] * 30, OPTIONS)
    pool = Preprocessor(2, OPTIONS)
    try:
        q = InOrder(pool, depth=2)
        got = []
        for i in range(0, 30, 5):  # six batches; never more than depth + 1 held
            q.submit(list(range(i, i + 5)), texts[i:i + 5], [None] * 5, [None] * 5)
            got += q.take(block=False)
            assert len(q) <= 2
        got += q.take(block=True)
        assert len(q) == 0 and [i for items, _ in got for i in items] == list(range(30))
        assert [p.digest for _, ps in got for p in ps] == [p.digest for p in here]
        assert q.seconds > 0 and q.new_seconds() == q.seconds and q.new_seconds() == 0
    finally:
        pool.close()


def _warm_state(_: int) -> tuple[int, int]:
    """In a pool process: its pid and how many redaction rule sets it has built (its warm-up's one-off cost)."""
    from worker.redaction.redact import redactor

    return os.getpid(), redactor.cache_info().currsize


def test_every_pool_process_warms_up_before_the_first_batch():
    """The pool hands a task to whichever process is free, so warm-up tasks alone left a process of 2 or 4
    mostly cold, and the first batch paid its start (the redaction rules, the header grammar's JIT). Each
    process warms in its initializer, and the constructor waits for all of them."""
    for processes in (2, 4):
        pool = Preprocessor(processes, OPTIONS)
        try:
            pids = {p.pid for p in pool._pool._processes.values()}
            assert len(pids) == processes and pool.warmed == pids
            seen = dict(pool._pool.map(_warm_state, range(8 * processes)))  # whichever processes take them
            assert seen and all(built >= 1 for built in seen.values())
        finally:
            pool.close()
