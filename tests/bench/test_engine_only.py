"""The benchmarks' engine-only phase with the model in its own process, however that process batches:
results per bin ("done", a bin at a time) or per document ("docs", continuous batching)."""

from __future__ import annotations

import json
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


def test_a_run_stopped_between_pairs_keeps_the_pairs_it_finished(tmp_path, monkeypatch):
    """bench.e2e writes its JSON after every pair: a device call that stops it at its time limit keeps the
    finished pairs, marked `complete` false."""
    import bench.e2e as e2e

    settings = SimpleNamespace(batching=SimpleNamespace(mode="continuous", order="arrival"))
    eng = SimpleNamespace(device=SimpleNamespace(type="cpu"), backend="fake", send_bin=None)
    parts = SimpleNamespace(engine=eng, budget=64)
    planner = SimpleNamespace(plan_many=lambda texts: [SimpleNamespace(prompts=[[1, 2, 3]]) for _ in texts])
    monkeypatch.setattr(e2e, "load_parts", lambda a: (settings, parts, lambda: None))
    monkeypatch.setattr(e2e, "planned", lambda s, p, docs: (["x"] * len(docs), 1.0, planner))
    monkeypatch.setattr(e2e, "engine_only", lambda *a, **k: {"docs_per_s": 100.0})
    pairs = iter([80.0, 90.0])

    def end_to_end(*a):
        try:
            return {"docs_per_s": next(pairs), "publication": {"published": 0.5}, "summaries": 5}
        except StopIteration:
            raise KeyboardInterrupt from None  # the device's limit, in the third pair

    monkeypatch.setattr(e2e, "end_to_end", end_to_end)
    out = tmp_path / "e2e.json"
    with pytest.raises(KeyboardInterrupt):
        e2e.main(["--documents", "5", "--runs", "3", "--out", str(out)])
    got = json.loads(out.read_text())
    assert got["complete"] is False and got["worker_overhead_pct_runs"] == pytest.approx([20.0, 10.0])
