"""A poll batch that reaches an idle model goes to the preprocessing pool in doubling pieces.

The ingest stage with a recording packer (no broker: only `_submit` and `_take_prepared` run), the
real preprocessing pass (in the calling thread, or in a pool of two processes), planner and registry.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from stage_fakes import make_doc

from worker.pipeline.configs import ingest_config
from worker.config.settings import KafkaSettings, PipelineSettings, Settings
from worker.observability.metrics import Metrics
from worker.packer import PackerStats
from worker.pipeline.commits import Commits
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.ingest import Downstream, Ingest, Watermarks, cold_pieces
from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.preprocess import InOrder, Preprocessor
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker


class RecordingPacker:
    """Records each submit_many (the sequence ids, in order); holds `pending` sequences already."""

    def __init__(self, pending: int = 0) -> None:
        self.pending, self.calls = pending, []

    def stats(self) -> PackerStats:
        return PackerStats(pending_seqs=self.pending)

    def submit_many(self, items) -> None:
        self.calls.append([sid for sid, _, _ in items])


def make_ingest(packer: RecordingPacker | None, processes: int = 0,
                finished: list | None = None) -> tuple[Ingest, OffsetTracker]:
    s = Settings(kafka=KafkaSettings(input_topics=("in",), output_topic="out", dlq_topic="dlq", group_id="g"),
                 pipeline=PipelineSettings(preprocess_processes=0))
    tracker, metrics = OffsetTracker(), Metrics()
    dead = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=lambda: None)
    planner = Planner(lambda text: [1] * (8 + len(text.split())), lambda texts: [len(t.split()) for t in texts],
                      PlanLimits(4096))
    down = Downstream(packer, planner) if finished is None else \
        Downstream(finished=lambda doc, text: finished.append(doc.offset) or True)
    ingest = Ingest(config=ingest_config(s, Watermarks(10**9, 10**9, 10**9, 10**9)),
                    shared=Shared(tracker, DocRegistry(), metrics, dead), make_consumer=None,
                    commits=Commits(tracker), downstream=down)
    if processes:
        ingest.preprocess = Preprocessor(processes, ingest.prepare_options)
        ingest.batches = InOrder(ingest.preprocess, 2)
    return ingest, tracker


def docs(tracker: OffsetTracker, n: int) -> list:
    return [make_doc(tracker, offset=i, text=f"12:00:0{i % 10} node-{i} ERROR link {i} down\nretry {i}")
            for i in range(n)]


@given(n=st.integers(1, 5000), first=st.integers(1, 64))
@hsettings(max_examples=300, deadline=None)
def test_pieces_double_and_cover_the_batch(n, first):
    sizes = cold_pieces(n, first)
    assert sum(sizes) == n and all(s > 0 for s in sizes)
    assert sizes[:-1] == [first * 2 ** i for i in range(len(sizes) - 1)]  # first, 2 first, 4 first, ...
    if len(sizes) > 1:
        assert sizes[-1] >= 2 * sizes[-2]  # the rest fills at least the next doubling


@pytest.mark.parametrize("processes", [0, 2])
def test_an_idle_model_gets_the_first_documents_first(processes):
    packer = RecordingPacker(pending=0)
    ingest, tracker = make_ingest(packer, processes)
    try:
        batch = docs(tracker, 100)
        ingest._submit(batch)
        ingest._take_prepared(block=True)
    finally:
        ingest.preprocess.close()
    assert [len(c) for c in packer.calls] == cold_pieces(100, 8) == [8, 16, 76]
    ids = [sid for c in packer.calls for sid in c]
    assert ids == sorted(ids) and len(ids) == 100  # every document once, in fetch order
    assert [ingest.registry.pop(sid).doc.offset for sid in ids] == list(range(100))


def test_a_busy_packer_takes_the_batch_whole():
    packer = RecordingPacker(pending=3)  # documents wait there already: the model is not idle
    ingest, tracker = make_ingest(packer)
    ingest._submit(docs(tracker, 100))
    ingest._take_prepared(block=True)
    assert [len(c) for c in packer.calls] == [100]


def test_a_small_batch_is_not_split():
    packer = RecordingPacker()
    ingest, tracker = make_ingest(packer)
    ingest._submit(docs(tracker, 8))
    ingest._take_prepared(block=True)
    assert [len(c) for c in packer.calls] == [8]


def test_digest_mode_has_no_model_to_wait_for():
    out: list[int] = []
    ingest, tracker = make_ingest(None, finished=out)
    ingest._submit(docs(tracker, 100))
    assert len(ingest.batches) == 1  # one batch: no packer to ask, nothing split
    ingest._take_prepared(block=True)
    assert out == list(range(100))
