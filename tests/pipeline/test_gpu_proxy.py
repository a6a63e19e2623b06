"""The GPU stage with the model in the engine process, a bin at a time (a fake engine process): it moves
bins and results, queues one bin ahead only in a backlog (the packer's rule), keeps the metrics' meaning,
and stops on the process's death."""

from __future__ import annotations


import pytest
from helpers import wait_for
from stage_fakes import FakePacker, FakeSink, Generated, bin_of, gpu_stage, make_doc, registered

from worker.packer import PackerConfig
from worker.pipeline.inflight import DocRegistry
from worker.remote.process import EngineProcessError
from worker.pipeline.gpu_stage import GpuStage
from worker.pipeline.stage import Shared
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker
from remote_fakes import FakeRemote


@pytest.fixture
def parts():
    return OffsetTracker(), DocRegistry(), Metrics(), FakeSink()


def started(remote, packer, registry, sink, metrics, max_seqs: int = 256, batching: str = "bin"
            ) -> tuple[GpuStage, None]:
    packer.config = PackerConfig(budget=100, reserve_per_seq=4, max_seqs=max_seqs)  # its full-bin rule
    loop = gpu_stage(remote, packer, Shared(OffsetTracker(), registry, metrics), sink, batching=batching,
                     where="process", seed=5)
    loop.start()
    return loop, None


def stop(loop, _t) -> None:
    loop.stop()
    assert loop.join(5)


def test_bins_go_through_the_process_and_every_document_reaches_finishing(parts):
    tracker, registry, metrics, sink = parts
    docs = [make_doc(tracker, offset=o) for o in range(3)]
    prompts = [[1, 2], [3, 4, 5], [6]]
    sids = [registered(registry, d, [p])[0] for d, p in zip(docs, prompts)]
    packer = FakePacker([bin_of(7, sids[:2], prompts[:2]), bin_of(8, sids[2:], prompts[2:])])
    remote = FakeRemote()
    loop, t = started(remote, packer, registry, sink, metrics)
    try:
        wait_for(lambda: len(sink.bins) == 2, 5, "both bins at finishing")
    finally:
        stop(loop, t)
    assert loop.error is None and packer.released == [7, 8]
    (first, share), (second, _) = sink.bins
    assert [(s.doc.offset, r.text if not isinstance(r, BaseException) else "error") for s, r in first] == \
        [(0, "len 2"), (1, "error")]  # a lone failure travels as its exception
    assert [(s.doc.offset, r.text) for s, r in second] == [(2, "len 1")]
    assert share == pytest.approx(0.25)  # the process's own time (0.5 s) over the bin's documents
    assert remote.sent[0][1] == [docs[0].seed(5, 0), docs[1].seed(5, 0)]
    assert all(d.first_gpu == 10.0 and d.model_end == 10.5 for d in docs)  # when the process ran the bin
    get = metrics.registry.get_sample_value
    assert get("ribbon_bins_total") == 2 and get("ribbon_model_documents_total") == 3
    assert get("ribbon_gpu_busy_seconds_total") == pytest.approx(1.0)
    assert get("ribbon_input_tokens_total") == 6
    assert get("ribbon_model_errors_total") == 1 and get("ribbon_oom_splits_total") == 2
    assert tracker.take_ready() == []  # nothing per document happens in the proxy


def test_in_a_backlog_one_bin_runs_and_one_waits_there_no_more(parts):
    tracker, registry, metrics, sink = parts
    bins = []
    for o in range(5):
        (sid,) = registered(registry, make_doc(tracker, offset=o), [[1, 2]])
        bins.append(bin_of(o, [sid], [[1, 2]]))
    remote = FakeRemote(gated=True)
    # bins of one document at most: the packer holds full bins (a backlog), so one is queued ahead
    packer = FakePacker(bins)
    loop, t = started(remote, packer, registry, sink, metrics, max_seqs=1)
    try:
        # the running bin and one queued behind it; no room for a third until a result is back
        looks = []  # each time the stage asks the model's room
        room = loop.runner.room
        loop.runner.room = lambda flight: (looks.append(1), room(flight))[1]
        wait_for(lambda: len(remote.sent) == 2, 5, "two bins sent")
        seen = len(looks)
        wait_for(lambda: len(looks) >= seen + 3, 5, "the stage to ask three times more")
        assert len(remote.sent) == 2 and loop.busy_since is not None
        remote.gate.release()
        wait_for(lambda: len(sink.bins) == 1 and len(remote.sent) == 3, 5,
                 "one result back and the next bin queued in its place")
        assert loop.flight.bins() == 2
        assert len(remote.sent) == 3 and len(sink.bins) == 1
        remote.gate.release(4)
        wait_for(lambda: len(sink.bins) == 5, 5, "every bin at finishing")
    finally:
        stop(loop, t)
    assert len(sink.bins) == 5 and loop.busy_since is None


def test_without_a_full_bin_pending_the_next_bin_is_cut_when_the_model_is_free(parts):
    """Under a steady load (the packer holds less than a bin) nothing is queued behind the running
    bin: the next one is taken only when its result is back, so it holds what arrived meanwhile."""
    tracker, registry, metrics, sink = parts
    bins = []
    for o in range(3):
        (sid,) = registered(registry, make_doc(tracker, offset=o), [[1, 2]])
        bins.append(bin_of(o, [sid], [[1, 2]]))
    packer = FakePacker(bins)
    remote = FakeRemote(gated=True)
    loop, t = started(remote, packer, registry, sink, metrics)  # 256 seats, budget 100: 2 documents are no bin
    try:
        # the loop has looked at the packer three times with a bin in flight and cut nothing behind it
        wait_for(lambda: len(remote.sent) == 1 and packer.stats_calls >= 3, 5, "the proxy to decide three times")
        assert len(remote.sent) == 1 and len(packer.bins) == 2  # nothing queued behind the running bin
        remote.gate.release()
        wait_for(lambda: len(remote.sent) == 2, 5, "the next bin, cut when the first is back")
        assert len(sink.bins) == 1 and len(packer.bins) == 1
        remote.gate.release(2)
        wait_for(lambda: len(sink.bins) == 3, 5, "every bin at finishing")
    finally:
        stop(loop, t)
    assert len(sink.bins) == 3 and packer.released == [0, 1, 2]


@pytest.mark.parametrize("settled", [False, True])
def test_continuous_queues_a_partial_bin_behind_busy_seats_once_nothing_more_arrives(parts, settled):
    """Continuous batching, every seat taken: a partial bin waits in the packer while documents may still
    join it, and goes to the engine's queue once the input has settled (none for max_wait_s, or a drain),
    so that the engine fills the next free seats from it without a round trip."""
    tracker, registry, metrics, sink = parts
    sids = [registered(registry, make_doc(tracker, offset=o), [[1, 2]])[0] for o in range(3)]
    packer = FakePacker([bin_of(0, sids[:2], [[1, 2]] * 2), bin_of(1, sids[2:], [[1, 2]])], settled=settled)
    remote = FakeRemote(gated=True)
    loop, t = started(remote, packer, registry, sink, metrics, max_seqs=2, batching="continuous")  # 2 seats
    try:
        wait_for(lambda: len(remote.sent) == (2 if settled else 1) and packer.stats_calls >= 3, 5,
                 "the stage to decide three times with both seats taken")
        assert len(remote.sent) == (2 if settled else 1) and len(sink.bins) == 0  # the model has returned nothing
        remote.gate.release(2)
        wait_for(lambda: len(sink.bins) == 2, 5, "both bins at finishing")
    finally:
        stop(loop, t)
    assert packer.released == [0, 1]


def test_revoked_documents_are_sent_as_not_live_and_never_reach_finishing(parts):
    tracker, registry, metrics, sink = parts
    (sid,) = registered(registry, make_doc(tracker), [[1, 2]])
    registry.drop_epochs({tracker.epoch(("in", 0))})
    remote = FakeRemote()
    loop, t = started(remote, FakePacker([bin_of(0, [sid], [[1, 2]])]), registry, sink, metrics)
    try:
        wait_for(lambda: len(remote.sent) == 1 and remote.results.empty(), 5, "the bin there and its result read")
    finally:
        stop(loop, t)
    assert remote.sent[0][2] == [False] and sink.bins == [] and loop.flight.docs == 0


def test_the_process_dying_stops_the_stage_with_its_error(parts):
    tracker, registry, metrics, sink = parts
    remote = FakeRemote()
    loop, t = started(remote, FakePacker(), registry, sink, metrics)
    remote.dead = True
    wait_for(lambda: loop.error is not None, 5, "the stage to fail")
    loop.stop()
    assert loop.join(5)
    assert isinstance(loop.error, EngineProcessError) and "exit code -9" in str(loop.error)


def test_a_result_of_another_stage_on_the_same_process_is_dropped(parts):
    tracker, registry, metrics, sink = parts
    remote = FakeRemote()
    remote.results.put(("done", 999, [Generated("stale", [1])], 1.0, 2.0, 0, 0))
    loop, t = started(remote, FakePacker(), registry, sink, metrics)
    wait_for(remote.results.empty, 5, "the stale result to be read")
    stop(loop, t)  # joins the receiver, which handled the stale result before taking it off the queue's end
    assert sink.bins == [] and loop.error is None
    assert metrics.registry.get_sample_value("ribbon_bins_total") == 0
