"""The GPU stage with the model in this process, a bin at a time (fake engine and packer): it runs bins,
retries failures alone, hands results over; the engine warms up before the packer exists."""

from __future__ import annotations

import pytest
from helpers import wait_for
from stage_fakes import FakePacker, FakeSink, Generated, bin_of, gpu_stage, make_doc, registered

from worker.packer import PackerConfig
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.stage import Shared
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker


class Staged:
    def __init__(self, tokens, cu) -> None:
        self.lens = [int(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)]

    def wait_copied(self) -> None:
        pass


class FakeEngine:
    """Returns the prompt length as text; fails whole bins of more than `fail_above` documents."""

    name = "fake"

    def __init__(self, fail_above: int = 10**9, fail_len: int = -1) -> None:
        self.fail_above, self.fail_len, self.calls = fail_above, fail_len, []
        self.stats = {"oom_splits": 0}

    def stage(self, tokens, cu, max_seqlen):
        return Staged(tokens, cu)

    def generate(self, staged: Staged, seeds):
        self.calls.append(len(staged.lens))
        if len(staged.lens) > self.fail_above:
            raise RuntimeError("bin failed")
        if self.fail_len in staged.lens:
            raise RuntimeError("this document fails")
        return [Generated(f"len {n}", [1] * n) for n in staged.lens]


@pytest.fixture
def parts():
    return OffsetTracker(), DocRegistry(), Metrics(), FakeSink()


def run_bins(engine, bins, registry, sink, metrics, n_docs: int) -> FakePacker:
    packer = FakePacker(bins, config=PackerConfig(budget=100, reserve_per_seq=4))
    stage = gpu_stage(engine, packer, Shared(OffsetTracker(), registry, metrics), sink)
    stage.start()
    try:
        wait_for(lambda: sum(len(p) for p, _ in sink.bins) == n_docs, 10, "every document at finishing")
    finally:
        stage.stop()
        assert stage.join(5) and stage.error is None
    return packer


def test_a_bin_runs_and_every_document_goes_to_finishing(parts):
    tracker, registry, metrics, sink = parts
    docs = [make_doc(tracker, offset=o) for o in range(3)]
    prompts = [[1, 2], [3, 4, 5], [6]]
    sids = [registered(registry, d, [p])[0] for d, p in zip(docs, prompts)]
    packer = run_bins(FakeEngine(), [bin_of(1, sids, prompts)], registry, sink, metrics, 3)
    (pairs, share), = sink.bins
    assert [(s.doc.offset, r.text) for s, r in pairs] == [(0, "len 2"), (1, "len 3"), (2, "len 1")]
    assert packer.released == [1] and share > 0
    assert all(d.first_gpu is not None and d.model_end >= d.first_gpu for d in docs)
    assert metrics.registry.get_sample_value("ribbon_input_tokens_total") == 6
    assert metrics.registry.get_sample_value("ribbon_bin_seconds_count") == 1
    assert metrics.registry.get_sample_value("ribbon_bins_total") == 1
    assert tracker.take_ready() == []  # nothing per document happens on the GPU thread


def test_a_failing_bin_is_retried_alone_and_a_lone_failure_travels_as_its_exception(parts):
    tracker, registry, metrics, sink = parts
    prompts = [[1, 2], [3, 4, 5]]
    sids = [registered(registry, make_doc(tracker, offset=o), [p])[0] for o, p in enumerate(prompts)]
    engine = FakeEngine(fail_above=1, fail_len=3)
    run_bins(engine, [bin_of(0, sids, prompts)], registry, sink, metrics, 2)
    (pairs, _), = sink.bins
    assert engine.calls == [2, 1, 1]
    assert pairs[0][1].text == "len 2" and isinstance(pairs[1][1], RuntimeError)
    assert metrics.registry.get_sample_value("ribbon_model_errors_total") == 1


def test_warm_up_runs_at_start_before_the_packer_exists(monkeypatch):
    """CUDA graphs and the KV pool are set up by Engine.warm_up in build_parts, before any bin can form."""
    from worker.pipeline import app
    from worker.config.settings import load_settings

    events: list[str] = []

    class WarmEngine(FakeEngine):
        device, backend = "cpu", "fake"

        def warm_up(self, budget: int, max_seqs: int) -> None:
            events.append(f"warm_up {budget} {max_seqs}")

    make_packer = app.make_packer
    monkeypatch.setattr(app, "make_packer", lambda *a, **k: (events.append("packer"), make_packer(*a, **k))[1])
    settings = load_settings(environ={}, overrides={"batching.token_budget": 4096, "batching.max_seqs_per_bin": 32})
    parts = app.build_parts(settings, engine=WarmEngine())
    assert events == ["warm_up 4096 32", "packer"] and parts.budget == 4096
    parts.packer.close()
