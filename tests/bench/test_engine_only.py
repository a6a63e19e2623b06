"""The benchmarks' engine-only phase with the model in its own process, however that process batches:
results per bin ("done", a bin at a time) or per document ("docs", continuous batching)."""

from __future__ import annotations

import queue
import time
from types import SimpleNamespace

import pytest

from bench.e2e import engine_only
from worker.packer import Packer, PackerConfig


class FakeEngineProcess:
    """EngineProcess's protocol: bins in; "done" per bin or "docs" per document out, timed 1 s a bin."""

    def __init__(self, batching: str) -> None:
        self.batching, self.results, self.ids, self.clock = batching, queue.Queue(), 0, time.monotonic()

    def send_bin(self, tokens, cu, max_seqlen, seeds, live) -> int:
        self.ids += 1
        outs = [SimpleNamespace(token_ids=[1, 2]) for _ in range(len(cu) - 1)]
        t0, self.clock = self.clock, self.clock + 1.0
        if self.batching == "bin":
            self.results.put(("done", self.ids, outs, t0, self.clock, 0, 0))
        else:  # each document in a "docs" message of its own
            for i, o in enumerate(outs):
                self.results.put(("docs", [(self.ids, i, o)], t0, self.clock, 0, 0, 0.5))
        return self.ids

    def receive(self, timeout_s: float):
        try:
            return self.results.get(timeout=min(timeout_s, 0.05))
        except queue.Empty:
            return None


@pytest.mark.parametrize("batching", ["bin", "continuous"])
def test_the_engine_only_phase_ends_with_every_document_back_in_either_batching(batching):
    packer = Packer.from_config(PackerConfig(budget=64, reserve_per_seq=4, max_seqs=4, max_wait_s=0.001))
    packer.drain(True)
    try:
        parts = SimpleNamespace(packer=packer, engine=FakeEngineProcess(batching))
        r = engine_only(parts, [[1, 2, 3]] * 10, list(range(10)), timeout_s=2.0)  # a wait that ends, if it fails
    finally:
        packer.close()
    assert r["bins"] == 3 and r["output_tokens"] == 20  # every document back, counted once
    assert r["wall_s"] > 0
