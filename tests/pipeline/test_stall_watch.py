"""The stall watch of the GPU stage in the engine process with continuous batching: it counts from the
last progress (a result back, or a send that found nothing in flight), not from the stage's creation."""

from __future__ import annotations

import pytest
from stage_fakes import FakePacker, FakeSink, bin_of, make_doc, registered
from remote_fakes import FakeRemote

from worker.observability.metrics import Metrics
from worker.packer import PackerConfig
from worker.pipeline import gpu_proxy
from worker.pipeline.gpu_proxy_continuous import ContinuousProcessGpuLoop
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(gpu_proxy.time, "monotonic", c)
    return c


def test_a_stage_2_s_old_with_work_in_flight_for_0_2_s_reports_0_2_s(clock):
    tracker, registry = OffsetTracker(), DocRegistry()
    sids = [registered(registry, make_doc(tracker, offset=o), [[1, 2]])[0] for o in range(2)]
    loop = ContinuousProcessGpuLoop(engine=FakeRemote(gated=True), packer=FakePacker(),
                                    shared=Shared(tracker, registry, Metrics()), finishing=FakeSink(),
                                    config=PackerConfig(budget=100, reserve_per_seq=4, max_seqs=8))
    clock.t += 1.8
    loop._send(bin_of(0, sids, [[1, 2], [1, 2]]))
    clock.t += 0.2
    assert loop.stalled_s() == pytest.approx(0.2)
    clock.t += 1.0
    loop._docs_back([(1, 0, None)], 0.0, 0.0, 0, 0, 0.0)  # one document back: progress
    clock.t += 0.3
    assert loop.stalled_s() == pytest.approx(0.3)
