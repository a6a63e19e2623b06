"""The ingest stage against a broker frozen (SIGSTOP) past the session timeout: lost partitions come back live.

Real consumer, real broker (a private embedded Tansu, so freezing it touches no other test), real
tracker, registry and planner; the packer is a fake whose backlog the test sets, so the order of
pause, loss, resume and reassignment is exact instead of left to timing; no delivery stands behind
the commit channel.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from helpers import frozen, produce, wait_for

from worker.pipeline.configs import ingest_config
from worker.kafka.clients import Clients
from worker.kafka.config import client_config
from worker.packer import PackerStats
from worker.pipeline.commits import Commits
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.ingest import Downstream, Ingest, Watermarks
from worker.observability.metrics import Metrics
from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker
from worker.config.settings import KafkaSettings, Settings

SESSION_MS = 6000


class FakePacker:
    """Holds nothing; reports the backlog the test sets (what backpressure reads)."""

    def __init__(self) -> None:
        self.pending_tokens = 0

    def stats(self) -> PackerStats:
        return PackerStats(pending_tokens=self.pending_tokens)

    def submit_many(self, items) -> None:
        pass

    def cancel(self, key: int) -> list[int]:
        return []


def no_delivery(tracker: OffsetTracker) -> Commits:
    """The commit channel with no delivery behind it: a revoke forgets its partitions at once."""
    commits = Commits(tracker)
    commits.close()
    return commits


def make_ingest(bootstrap: str, topic: str, hold_warning_s: float | None = None) -> tuple[Ingest, FakePacker]:
    settings = Settings(kafka=KafkaSettings(input_topics=(topic,), output_topic="out", dlq_topic="dlq",
                                            group_id=f"g-{topic}", delivery="at_least_once",
                                            consumer_extra={"session.timeout.ms": SESSION_MS}))
    conf = client_config(settings.kafka, bootstrap=bootstrap)
    tracker, packer = OffsetTracker(), FakePacker()
    metrics = Metrics()
    dead_letters = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: metrics.dead_lettered.labels(c).inc(),
                               wake=lambda: None)
    planner = Planner(lambda text: [1] * (8 + len(text.split())), lambda texts: [len(t.split()) for t in texts],
                      PlanLimits(4096))
    marks = Watermarks(high_tokens=1000, low_tokens=500, high_messages=10**6, low_messages=10**6)
    config = ingest_config(settings, marks)
    if hold_warning_s is not None:  # shorter than kafka.delivery_stuck_s allows
        config = dataclasses.replace(config, hold_warning_s=hold_warning_s)
    ingest = Ingest(config=config, shared=Shared(tracker, DocRegistry(), metrics, dead_letters),
                    make_consumer=Clients(conf).consumer, commits=no_delivery(tracker),
                    downstream=Downstream(packer, planner))
    return ingest, packer


def test_partitions_lost_while_paused_are_consumed_again(private_broker, caplog):
    caplog.set_level(logging.INFO, logger="worker.pipeline.ingest")
    b = private_broker
    topic = "freeze-in"
    b.create_topics({topic: 2})
    ingest, packer = make_ingest(b.bootstrap, topic)
    thread = threading.Thread(target=ingest.run, name="ribbon-ingest", daemon=True)
    thread.start()
    consumed = lambda: ingest.metrics.consumed._value.get()  # noqa: E731
    try:
        wait_for(lambda: len(ingest.tracker.partitions()) == 2, 30, "the first assignment")
        produce(b.bootstrap, topic, [f"line {i}".encode() for i in range(20)])
        wait_for(lambda: consumed() == 20, 30, "the first 20 messages")

        packer.pending_tokens = 5000  # over the high watermark: every partition paused
        wait_for(lambda: ingest.paused, 10, "backpressure to pause")
        with frozen(b.pid):  # the session times out: the partitions are lost while paused
            wait_for(lambda: not ingest.tracker.partitions(), 3 * SESSION_MS / 1e3, "the partitions to be lost")
            packer.pending_tokens = 0  # the backlog clears while nothing is assigned
            wait_for(lambda: not ingest.paused, 10, "backpressure to resume")
        wait_for(lambda: len(ingest.tracker.partitions()) == 2, 60, "the partitions to come back")
        produce(b.bootstrap, topic, [f"more {i}".encode() for i in range(20)])
        wait_for(lambda: consumed() >= 40, 30, "messages after the partitions came back (they stayed paused)")
    finally:
        ingest.stop()
        thread.join(30)
    assert ingest.error is None
    assert "lost" in caplog.text


def test_an_input_holding_its_partition_is_reported_by_coordinates(private_broker, caplog):
    """An input held past kafka.delivery_stuck_s: a log line naming topic/partition/offset, and a per-partition gauge."""
    caplog.set_level(logging.INFO, logger="worker.pipeline.ingest")
    b = private_broker
    b.create_topics({"held-in": 1})
    ingest, _ = make_ingest(b.bootstrap, "held-in", hold_warning_s=1.0)
    thread = threading.Thread(target=ingest.run, name="ribbon-ingest", daemon=True)
    thread.start()
    held = lambda: ingest.metrics.held.labels("held-in", "0")._value.get()  # noqa: E731
    try:
        wait_for(lambda: ingest.tracker.partitions() == [("held-in", 0)], 30, "the assignment")
        produce(b.bootstrap, "held-in", [b"slow one", b"quick two"])
        wait_for(lambda: ingest.tracker.pending() == 2, 30, "both messages")  # the fake packer never finishes them
        wait_for(lambda: "held-in/0@0 has held its partition" in caplog.text, 15, "the slow-input warning")
        assert held() >= 1.0 and ingest.metrics.slow_documents._value.get() == 1
        epoch = ingest.tracker.epoch(("held-in", 0))
        for off in (0, 1):
            ingest.tracker.complete(("held-in", 0), epoch, off, ())
        wait_for(lambda: held() == 0, 15, "the gauge to clear once the input finished")
    finally:
        ingest.stop()
        thread.join(30)
    assert caplog.text.count("has held its partition") == 1, "one warning per input"
