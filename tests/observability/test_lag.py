"""Lag is measured against the committed offset; fetched-but-unfinished documents are counted apart."""

from __future__ import annotations

from dataclasses import dataclass

from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker, Record


@dataclass
class TP:
    topic: str
    partition: int
    offset: int = -1001


class FakeConsumer:
    """The three calls lag reporting makes, against a partition whose end offset is `high`."""

    def __init__(self, high: int, position: int) -> None:
        self.high, self.pos = high, position

    def assignment(self):
        return [TP("in", 0)]

    def position(self, parts):
        return [TP(p.topic, p.partition, self.pos) for p in parts]

    def get_watermark_offsets(self, tp, cached: bool = False):
        return 0, self.high


def report(tracker: OffsetTracker, consumer: FakeConsumer) -> Metrics:
    from worker.pipeline.progress import ProgressReports

    reports = ProgressReports(tracker, Metrics(), hold_warning_s=60.0)  # the ingest thread's reports alone
    reports.lag(consumer)
    return reports.metrics


def sample(m: Metrics, name: str) -> float | None:
    return m.registry.get_sample_value(name, {"topic": "in", "partition": "0"})


def test_fetched_but_unfinished_documents_count_as_lag():
    tracker = OffsetTracker()
    e = tracker.assign(("in", 0))
    for off in range(100, 150):  # resumed at the committed offset 100, fetched 50
        tracker.see(("in", 0), e, off)
    m = report(tracker, FakeConsumer(high=150, position=150))  # everything fetched: the old lag read 0
    assert sample(m, "ribbon_consumer_lag_messages") == 50
    assert sample(m, "ribbon_fetched_unfinished_messages") == 50


def test_lag_falls_as_delivery_commits():
    tracker = OffsetTracker()
    e = tracker.assign(("in", 0))
    for off in range(10):
        tracker.see(("in", 0), e, off)
    for off in range(6):
        tracker.complete(("in", 0), e, off, (Record("out", None, b"x"),))
    ready = tracker.take_ready()
    tracker.mark_committed(ready)
    m = report(tracker, FakeConsumer(high=12, position=10))
    assert sample(m, "ribbon_consumer_lag_messages") == 12 - 6
    assert sample(m, "ribbon_fetched_unfinished_messages") == 4


def test_nothing_fetched_yet_uses_the_position():
    tracker = OffsetTracker()
    tracker.assign(("in", 0))
    m = report(tracker, FakeConsumer(high=30, position=7))
    assert sample(m, "ribbon_consumer_lag_messages") == 23
    assert sample(m, "ribbon_fetched_unfinished_messages") == 0


def test_a_stale_epoch_commit_does_not_move_the_committed_offset():
    tracker = OffsetTracker()
    e = tracker.assign(("in", 0))
    tracker.see(("in", 0), e, 5)
    tracker.complete(("in", 0), e, 5, ())
    ready = tracker.take_ready()
    tracker.assign(("in", 0))  # revoked and assigned back: a new epoch
    tracker.mark_committed(ready)
    assert tracker.progress(("in", 0)) == (None, 0)
