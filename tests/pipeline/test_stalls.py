"""A stage that stops making progress is bounded: a stopped preprocessing pool process or a silent engine
process makes /readyz not ready, then stops the stage with a clear error (the worker exits 1)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import orjson
import pytest
from stage_fakes import FakePacker, FakeSink, bin_of, gpu_stage, make_doc, registered
from remote_fakes import FakeRemote
from ingest_fakes import Msg, make_ingest

from worker.digest.prepared import PrepareOptions
from worker.packer import PackerConfig
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.gpu_stage import GpuStalled
from worker.observability.metrics import HealthServer, Metrics, Probes
from worker.remote.process import EngineProcessError
from worker.pipeline.preprocess import InOrder, PreprocessStalled, Preprocessor, start_forkserver
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker

OPTIONS = PrepareOptions(highlights=2, compaction=False, min_saving=0.2, render=True)


def wait_for(cond, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class FakeConsumer:
    """Hands over `msgs` once `go` is set; everything else a consumer does, as no-ops."""

    def __init__(self, msgs, go: threading.Event) -> None:
        self.msgs, self.go = list(msgs), go

    def subscribe(self, *_a, **_k) -> None: ...
    def consumer_group_metadata(self): return None
    def assignment(self): return []
    def pause(self, _p) -> None: ...
    def resume(self, _p) -> None: ...
    def close(self) -> None: ...

    def consume(self, num_messages: int = 1, timeout: float = 0):
        if not self.go.is_set():
            return []
        out, self.msgs = self.msgs, []
        return out

    def poll(self, timeout: float):
        self.go.wait(timeout)
        return None


def test_a_stopped_pool_process_fails_ingest_after_the_stall_timeout_and_is_killed():
    start_forkserver()  # as the worker does, on a lasting thread (worker/remote/lifeline.py)
    ing, tracker, _ = make_ingest()
    ing.config = dataclasses.replace(ing.config, preprocess_processes=1, stall_timeout_s=1.5)
    go = threading.Event()
    ing.make_consumer = lambda: FakeConsumer([Msg(orjson.dumps({"text": "disk full on upf-1"}), 0)], go)
    t = threading.Thread(target=ing.run)
    t.start()
    try:
        assert wait_for(lambda: ing.preprocess._pool is not None and ing.preprocess._pool._processes)
        (pid,) = list(ing.preprocess._pool._processes)
        os.kill(pid, signal.SIGSTOP)
        go.set()
        assert wait_for(lambda: ing.batches.waiting_s() >= 0.75 or ing.error is not None)  # /readyz: not ready
        t.join(30)
        assert not t.is_alive()
        assert isinstance(ing.error, PreprocessStalled) and "pipeline.stall_timeout_s" in str(ing.error)
        assert wait_for(lambda: gone(pid), 10)  # killed: it cannot hold the worker's exit
    finally:
        ing.stop()
        go.set()
        t.join(30)


def test_in_order_waits_for_a_stopped_pool_at_most_the_timeout():
    pre = Preprocessor(1, OPTIONS)
    try:
        (pid,) = list(pre._pool._processes)
        os.kill(pid, signal.SIGSTOP)
        batches: InOrder[int] = InOrder(pre, depth=2, timeout_s=0.5)
        batches.submit([1], ["ERROR link down"], [None], [None])
        with pytest.raises(PreprocessStalled):
            batches.take(block=True)
        assert len(batches) == 1  # the batch stays: nothing is taken half-done
    finally:
        pre.close(kill=True)
    assert wait_for(lambda: gone(pid), 10)


class SilentRemote(FakeRemote):
    """An engine process that takes bins and never answers (stopped); `kill` ends it, after a moment (a real
    one waits for the process to exit)."""

    def __init__(self) -> None:
        super().__init__(gated=True)
        self.killed = False

    def kill(self) -> bool:
        time.sleep(0.3)
        self.killed = True
        return True


def test_a_silent_engine_process_makes_readyz_not_ready_then_is_killed_and_stops_the_stage():
    tracker, registry, metrics, sink = OffsetTracker(), DocRegistry(), Metrics(), FakeSink()
    doc = make_doc(tracker)
    sid = registered(registry, doc, [[1, 2, 3]])[0]
    remote = SilentRemote()
    packer = FakePacker(bins=[bin_of(0, [sid], [[1, 2, 3]])])
    packer.config = PackerConfig(budget=100, reserve_per_seq=4, max_seqs=8)
    loop = gpu_stage(remote, packer, Shared(OffsetTracker(), registry, metrics), sink, where="process", stall_s=1.0)
    health = HealthServer(metrics, "127.0.0.1", 0, Probes(health=loop.health))
    t = threading.Thread(target=loop.run)
    t.start()
    try:
        assert health.readiness()[0]
        assert wait_for(lambda: not health.readiness()[0])
        assert "not ready: the engine process (pid None) has returned nothing for" in health.readiness()[1]
        assert wait_for(lambda: loop.error is not None)
        assert isinstance(loop.error, GpuStalled) and "pipeline.stall_timeout_s" in str(loop.error)
        assert wait_for(lambda: remote.killed) and sink.bins == []  # killed right after the stall is recorded
    finally:
        loop.stop()
        t.join(5)
        health.http.httpd.server_close()
    assert not t.is_alive() and loop.join(5)


class BlockedRemote(SilentRemote):
    """An engine process stopped with its pipe full: a send blocks until the process is killed."""

    def __init__(self) -> None:
        super().__init__()
        self._gone = threading.Event()

    def send_bin(self, *a, bin_id: int | None = None) -> int:
        self._gone.wait(30)
        raise EngineProcessError("the engine process is gone")

    def kill(self) -> None:
        super().kill()
        self._gone.set()


def test_a_send_blocked_on_a_stopped_engine_process_is_a_stall_too():
    tracker, registry, metrics, sink = OffsetTracker(), DocRegistry(), Metrics(), FakeSink()
    sid = registered(registry, make_doc(tracker), [[1, 2, 3]])[0]
    remote = BlockedRemote()
    packer = FakePacker(bins=[bin_of(0, [sid], [[1, 2, 3]])], config=PackerConfig(budget=100, reserve_per_seq=4))
    loop = gpu_stage(remote, packer, Shared(OffsetTracker(), registry, metrics), sink, where="process", stall_s=0.5)
    t = threading.Thread(target=loop.run)
    t.start()
    try:
        assert wait_for(lambda: loop.error is not None)
        assert "pipeline.stall_timeout_s" in str(loop.error) and wait_for(lambda: remote.killed)
    finally:
        loop.stop()
        t.join(5)
    assert not t.is_alive() and loop.join(5)


class MidMessageRemote(SilentRemote):
    """An engine process stopped in the middle of writing a result: `receive` found the pipe readable and
    waits inside the message until the process is killed."""

    def __init__(self) -> None:
        super().__init__()
        self._gone = threading.Event()
        self.inside = threading.Event()

    def receive(self, timeout_s: float):
        if not self.sent:
            return super().receive(timeout_s)
        self.inside.set()
        self._gone.wait(30)
        raise EngineProcessError("the engine process ended (exit code -9)")

    def kill(self) -> None:
        super().kill()
        self._gone.set()


def test_a_receive_stuck_inside_a_message_of_a_stopped_engine_process_is_a_stall_too():
    tracker, registry, metrics, sink = OffsetTracker(), DocRegistry(), Metrics(), FakeSink()
    sid = registered(registry, make_doc(tracker), [[1, 2, 3]])[0]
    remote = MidMessageRemote()
    packer = FakePacker(bins=[bin_of(0, [sid], [[1, 2, 3]])], config=PackerConfig(budget=100, reserve_per_seq=4))
    loop = gpu_stage(remote, packer, Shared(OffsetTracker(), registry, metrics), sink, where="process", stall_s=0.5)
    t = threading.Thread(target=loop.run)
    t.start()
    try:
        assert wait_for(remote.inside.is_set)
        assert wait_for(lambda: loop.error is not None)
        assert isinstance(loop.error, GpuStalled) and sink.bins == []  # the stall, not the death its kill causes
        assert wait_for(lambda: remote.killed)
    finally:
        loop.stop()
        t.join(5)
    assert not t.is_alive() and loop.join(5)
