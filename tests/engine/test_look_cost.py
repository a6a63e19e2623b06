"""The decode loop's look costs the host a fixed number of loop-finder passes per look, whatever the
number of rows: the finder runs over the round's token table at once (loops.loops_at_ends,
loops.loop_starts), not once per live row and once per finished document (bench/look_cost.py times it)."""

from __future__ import annotations

import sys

import pytest
from engine_helpers import _docs, _engine, _stage

from worker.engine import loops
from worker.engine.tiny import make_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("qwen2"), arch="qwen2", seed=1)


def _calls_into_loops(run) -> int:
    """Python calls of functions defined in worker/engine/loops.py while `run()` runs."""
    calls = 0

    def profile(frame, event, _arg):
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == loops.__file__:
            calls += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def _continuous(eng, docs):
    b = eng.batcher(seats=len(docs), kv_rows=sum(len(d) for d in docs) + len(docs) * 16)
    b.add(_stage(eng, docs), list(range(len(docs))), list(range(len(docs))))
    done = []
    while b.busy:
        done += b.step().done
    assert len(done) == len(docs)


@pytest.mark.parametrize("way", ["continuous", "bin"])
def test_the_loop_finder_runs_per_look_not_per_row(tiny, way):
    """Every document runs to its cap (no EOS), all in one round pattern: 4 rows and 32 rows see the
    same looks, so the same number of loop-finder calls (per row: 8 times as many)."""
    counts = []
    for n in (4, 32):
        eng = _engine(tiny, max_new_tokens=16, check_every=4, cut_loops=True, stop_strings=("\n\n",))
        eng.eos_ids = ()
        docs = _docs(n, 3, 30, 500, seed=n)
        run = (lambda: _continuous(eng, docs)) if way == "continuous" else (lambda: eng.generate(_stage(eng, docs)))
        counts.append(_calls_into_loops(run))
    assert counts[0] > 0 and counts[1] == counts[0], counts
