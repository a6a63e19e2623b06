"""The GPU stage's contract, one suite over the four combinations of its two seams (as arroyo runs one
behavioural suite over every processing strategy): the model in this process | in the engine process,
a bin at a time | continuous. Fake models (tests/gpu_fakes.py) and a fake clock: the stall limit is
crossed by moving the clock, not by waiting."""

from __future__ import annotations

import threading

import pytest
from gpu_fakes import FAILS, FakeEngine, FakeEngineProcess
from helpers import wait_for
from stage_fakes import FakePacker, bin_of, make_doc, registered

from worker.observability.metrics import Metrics
from worker.packer import PackerConfig
from worker.pipeline.gpu_batching import batching_policy
from worker.pipeline.gpu_runners import LocalRunner, ProcessRunner
from worker.pipeline.gpu_stage import GpuConfig, GpuStage, GpuStalled
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker, Record

STALL_S = 300.0
COMBOS = [("local", "bin"), ("local", "continuous"), ("process", "bin"), ("process", "continuous")]


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


class CompletingSink:
    """Finishing, as far as the tracker sees it: each document handed over completes its offset."""

    def __init__(self, tracker: OffsetTracker) -> None:
        self.tracker, self.handed, self.open = tracker, [], True

    def submit_bin(self, pairs, gpu_s_per_doc: float) -> bool:
        if not self.open:
            return False
        for seq, out in pairs:
            self.handed.append((seq.doc.tp, seq.doc.offset, out))
            self.tracker.complete(seq.doc.tp, seq.doc.epoch, seq.doc.offset, (Record("out", None, b"x"),))
        return True

    def offsets(self) -> list[tuple]:
        return sorted((tp, off) for tp, off, _ in self.handed)


class Rig:
    """One stage of a combination, its fakes and its clock."""

    def __init__(self, where: str, batching: str, gated: bool = False, max_seqs: int = 4, model=None) -> None:
        self.tracker, self.registry, self.metrics, self.clock = OffsetTracker(), DocRegistry(), Metrics(), Clock()
        self.sink, self.packer = CompletingSink(self.tracker), FakePacker()
        self.packer.config = config = PackerConfig(budget=1_000, reserve_per_seq=4, max_seqs=max_seqs)
        self.model = model or (FakeEngine(gated) if where == "local" else FakeEngineProcess(batching, gated))
        runner = (LocalRunner if where == "local" else ProcessRunner)(self.model, batching_policy(batching), config)
        self.stage = GpuStage(runner=runner, packer=self.packer, shared=Shared(self.tracker, self.registry, self.metrics),
                              finishing=self.sink, config=GpuConfig(config, seed=5, stall_s=STALL_S), clock=self.clock)
        self.next = {}  # tp -> next offset

    def bin(self, lens: list[int], tps=(("in", 0),)) -> None:
        """A bin of documents of these prompt lengths, over the partitions in turn, for the packer."""
        sids, prompts = [], []
        for i, n in enumerate(lens):
            tp = tps[i % len(tps)]
            off = self.next[tp] = self.next.get(tp, -1) + 1
            sids += registered(self.registry, make_doc(self.tracker, tp=tp, offset=off), [[7] * n])
            prompts.append([7] * n)
        self.packer.bins.append(bin_of(len(self.packer.bins), sids, prompts))

    def handed(self) -> int:
        return len(self.sink.handed)

    def __enter__(self) -> Rig:
        self.stage.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stage.stop()
        self.model.gate.release(10**5)
        assert self.stage.join(30)


@pytest.fixture(params=COMBOS, ids=lambda c: f"{c[0]}-{c[1]}")
def combo(request):
    return request.param


def test_every_result_reaches_finishing_once_and_commits_in_offset_order_per_partition(combo):
    two = (("in", 0), ("in", 1))
    with Rig(*combo) as rig:
        rig.bin([2, 4, 5, 6], two)
        rig.bin([FAILS, 2, 8], two)
        rig.bin([1, 9], two)
        wait_for(lambda: rig.handed() == 9, 30, "every document at finishing")
    assert rig.stage.error is None
    assert rig.sink.offsets() == sorted([(("in", 0), o) for o in range(5)] + [(("in", 1), o) for o in range(4)])
    failed = [out for _, _, out in rig.sink.handed if isinstance(out, BaseException)]
    assert len(failed) == 1  # the document that fails alone travels as its exception
    ready = rig.tracker.take_ready()
    assert {r.tp: list(r.offsets) for r in ready} == {("in", 0): list(range(5)), ("in", 1): list(range(4))}
    assert rig.packer.released == [0, 1, 2]


def test_the_metrics_keep_their_meaning_in_every_combination(combo):
    with Rig(*combo) as rig:
        rig.bin([2, 4])
        rig.bin([5])
        wait_for(lambda: rig.handed() == 3, 30, "every document at finishing")
        wait_for(lambda: rig.stage.busy_since is None, 30, "nothing in flight")
    get = rig.metrics.registry.get_sample_value
    assert get("ribbon_bins_total") == 2 and get("ribbon_input_tokens_total") == 11
    assert get("ribbon_model_documents_total") == 3
    assert get("ribbon_bin_fill_ratio_count") == 2 and get("ribbon_bin_seconds_count") >= 2
    assert get("ribbon_gpu_busy_seconds_total") > 0


def test_a_model_that_returns_nothing_is_not_ready_at_half_the_limit_and_fails_the_stage_at_it(combo):
    with Rig(*combo, gated=True) as rig:
        rig.bin([2, 4])
        wait_for(lambda: rig.stage.flight.docs == 2, 30, "the bin in flight")
        rig.clock.t += 0.2
        assert rig.stage.stalled_s() == pytest.approx(0.2)
        assert rig.stage.health().ready
        rig.clock.t += STALL_S / 2
        h = rig.stage.health()
        assert not h.ready and h.live and "pipeline.stall_timeout_s" in h.why
        assert rig.stage.error is None
        rig.clock.t += STALL_S / 2
        wait_for(lambda: rig.stage.error is not None, 30, "the stall watch")
        err = rig.stage.error
        assert isinstance(err, GpuStalled) and "RIBBON_PIPELINE__STALL_TIMEOUT_S" in str(err)
        assert not rig.stage.health().live
        if combo[0] == "process":
            assert rig.model.killed and "it was killed" in str(err)
        else:  # a thread cannot be killed: the worker exits, and join does not wait for the stuck thread
            assert "the worker exits 1" in str(err) and rig.stage.join(0)
        assert rig.handed() == 0


def test_a_stage_long_alive_with_work_just_sent_counts_the_stall_from_the_send(combo):
    with Rig(*combo, gated=True) as rig:
        rig.clock.t += 2.0  # the stage is 2 s old
        rig.bin([2])
        wait_for(lambda: rig.stage.flight.docs == 1, 30, "the bin in flight")
        rig.clock.t += 0.2
        assert rig.stage.stalled_s() == pytest.approx(0.2)


def test_steady_load_for_ten_times_the_stall_limit_stays_ready(combo):
    with Rig(*combo) as rig:
        for i in range(100):  # a bin every tenth of the limit, each back before the next
            rig.clock.t += STALL_S / 10
            rig.bin([2, 3 + i % 2 + (i % 2 == 0)])
            wait_for(lambda: rig.handed() == 2 * (i + 1), 30, f"bin {i} back")
            h = rig.stage.health()
            assert h.ready and h.live, h.why
        assert rig.stage.error is None


def test_a_stage_waiting_on_finishing_is_not_a_stalled_model(combo):
    with Rig(*combo) as rig:
        rig.stage._handing = True  # as while finishing.submit_bin blocks on a full queue
        rig.bin([2])
        rig.clock.t += STALL_S
        assert rig.stage.stalled_s() == 0.0
        rig.stage._handing = False


def test_stop_hands_over_what_is_in_flight_then_returns(combo):
    rig = Rig(*combo, gated=True)
    with rig:
        rig.bin([2, 4, 5])
        wait_for(lambda: rig.stage.flight.docs == 3, 30, "the bin in flight")
        rig.stage.stop()
        assert rig.packer.closed
        rig.model.gate.release(3)
        assert rig.stage.join(30)
        assert rig.handed() == 3 and rig.stage.error is None


def test_revoked_documents_never_come_back(combo):
    with Rig(*combo) as rig:
        rig.bin([2], tps=(("in", 9),))
        rig.registry.drop_epochs({rig.tracker.epoch(("in", 9))})
        rig.bin([4])
        wait_for(lambda: rig.handed() == 1, 30, "the live document")
        wait_for(lambda: rig.stage.flight.docs == 0, 30, "nothing in flight")
    assert rig.sink.offsets() == [(("in", 0), 0)]


def test_the_engine_process_dying_stops_the_stage_with_its_error():
    for batching in ("bin", "continuous"):
        rig = Rig("process", batching)
        with rig:
            rig.model.killed = True
            wait_for(lambda: rig.stage.error is not None, 30, "the stage to fail")
        assert "exit code -9" in str(rig.stage.error)


class SlowPipe(FakeEngineProcess):
    """An engine process whose pipe takes every bin after the first slowly: the write of one returns only
    once `written` is set. `read_early`: the engine has the bin (and may answer it) before the write returns,
    as when it reads the last part of a large bin while the sender is still in its write call."""

    def __init__(self, batching: str, read_early: bool) -> None:
        super().__init__(batching, gated=True)
        self.read_early, self.writing, self.written = read_early, threading.Event(), threading.Event()

    def send_bin(self, tokens, cu, max_seqlen, seeds, live, bin_id: int | None = None) -> int:
        if not self.sent:
            return super().send_bin(tokens, cu, max_seqlen, seeds, live, bin_id)
        if self.read_early:
            bin_id = super().send_bin(tokens, cu, max_seqlen, seeds, live, bin_id)
        self.writing.set()
        assert self.written.wait(30), "the test never let the write end"
        return bin_id if self.read_early else super().send_bin(tokens, cu, max_seqlen, seeds, live, bin_id)


@pytest.mark.parametrize("batching", ["bin", "continuous"])
def test_a_slow_write_to_the_engine_process_holds_up_neither_results_nor_health(batching):
    slow = SlowPipe(batching, read_early=False)
    with Rig("process", batching, max_seqs=1, model=slow) as rig:
        rig.bin([2])
        wait_for(lambda: rig.stage.flight.docs == 1, 30, "the first bin in flight")
        rig.bin([4])
        wait_for(slow.writing.is_set, 30, "the second bin's write under way")
        slow.gate.release(1)  # the first bin's result comes back while the second is being written
        try:
            wait_for(lambda: rig.handed() == 1, 30, "the first bin's document at finishing during the write")
            h = rig.stage.health()
            assert h.ready and h.live
            assert rig.stage.stalled_s() == 0.0
        finally:
            slow.written.set()
        slow.gate.release(1)
        wait_for(lambda: rig.handed() == 2, 30, "the second bin's document at finishing")
    assert rig.stage.error is None and rig.sink.offsets() == [(("in", 0), 0), (("in", 0), 1)]


@pytest.mark.parametrize("batching", ["bin", "continuous"])
def test_a_result_that_comes_back_before_its_write_returns_is_handed_over_once(batching):
    slow = SlowPipe(batching, read_early=True)
    with Rig("process", batching, max_seqs=1, model=slow) as rig:
        rig.bin([2])
        wait_for(lambda: rig.stage.flight.docs == 1, 30, "the first bin in flight")
        slow.gate.release(1)
        wait_for(lambda: rig.handed() == 1, 30, "the first bin's document at finishing")
        rig.bin([4])
        wait_for(slow.writing.is_set, 30, "the second bin's write under way")
        slow.gate.release(1)  # the engine answers the second bin before its write returns
        try:
            wait_for(lambda: rig.handed() == 2, 30, "the second bin's document at finishing during its write")
        finally:
            slow.written.set()
        wait_for(lambda: rig.stage.flight.docs == 0, 30, "nothing in flight")
    assert rig.stage.error is None and rig.sink.offsets() == [(("in", 0), 0), (("in", 0), 1)]
