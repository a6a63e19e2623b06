"""The commit watch (worker/pipeline/commitwatch.py) with a fake clock: a partition assigned, with input
waiting and no commit for pipeline.stall_timeout_s is not ready; at twice that the worker stops with a
line naming the partition and the last problem logged."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, Gauge

from worker.pipeline.commitwatch import CommitWatch, LastProblem, State

TP = ("in", 3)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def watch(stall_s: float = 60.0) -> tuple[CommitWatch, Clock]:
    clock = Clock()
    return CommitWatch(stall_s, clock), clock


def test_a_group_that_never_resumes_turns_unready_then_fails_naming_the_partition_and_the_last_problem():
    """The offset fetch never returns: nothing committed is known, nothing is fetched, for ever."""
    w, clock = watch(60)
    w.observe({TP: State(None, None)})
    w.note("WARNING worker.pipeline.source: consume error: Timed out")
    clock.t += 59
    assert w.status() == (True, "progressing") and w.failure() is None
    clock.t += 1
    ok, why = w.status()
    assert not ok and why.startswith("partition in/3 has committed nothing for 60 s with input waiting "
                                     "(committed offset unknown (the offset fetch has not returned)")
    assert w.failure() is None
    clock.t += 60
    line = w.failure()
    assert line is not None and "partition in/3 has committed nothing for 120 s" in line
    assert line.endswith("last problem: WARNING worker.pipeline.source: consume error: Timed out")


def test_a_commit_resets_the_clock_and_a_partition_without_lag_is_never_stalled():
    w, clock = watch(60)
    w.observe({TP: State(10, 50, unfinished=40)})
    clock.t += 50
    w.observe({TP: State(20, 50, unfinished=30)})  # a commit
    clock.t += 50
    assert w.status()[0] and w.stalled_for() == {TP: 50.0}
    w.observe({TP: State(50, 51)})  # caught up but for a transaction's commit marker: idle
    clock.t += 1000
    assert w.status()[0] and w.failure() is None and w.stalled_for() == {TP: 0.0}


def test_lag_without_commits_stalls_even_when_nobody_observes_any_more():
    """The ingest thread stuck: no more reports, the clock still runs."""
    w, clock = watch(10)
    w.observe({TP: State(5, 500)})
    clock.t += 20
    assert w.failure() is not None and "high watermark 500" in w.failure()


def test_a_revoked_partition_is_forgotten():
    w, clock = watch(10)
    w.observe({TP: State(5, 500), ("in", 4): State(0, 0)})
    clock.t += 15
    assert not w.status()[0]
    w.observe({("in", 4): State(0, 0)})
    assert w.status()[0] and set(w.stalled_for()) == {("in", 4)}


def test_the_gauge_and_the_last_problem_handler():
    w, clock = watch(10)
    gauge = Gauge("stalled", "x", ["topic", "partition"], registry=CollectorRegistry())
    w.observe({TP: State(None, 7)})
    clock.t += 4
    w.export(gauge)
    assert gauge.labels("in", "3")._value.get() == 4.0
    w.observe({})
    w.export(gauge)
    assert list(gauge.collect()[0].samples) == []
    log = logging.getLogger("worker.test_commitwatch")
    handler = LastProblem(w)
    log.addHandler(handler)
    try:
        log.info("fine")
        log.error("transaction aborted (%s)", "MSG_SIZE_TOO_LARGE")
    finally:
        log.removeHandler(handler)
    w.observe({TP: State(None, 7)})
    clock.t += 25
    assert w.failure().endswith("last problem: ERROR worker.test_commitwatch: transaction aborted (MSG_SIZE_TOO_LARGE)")


def test_a_stall_limit_must_be_positive():
    with pytest.raises(ValueError, match="stall_s must be > 0"):
        CommitWatch(0)


# ---- the ingest thread's reports feed it (worker/pipeline/progress.py) ----------------------------

class Consumer:
    """An assignment of one partition nothing was read from; `committed` answers, or times out."""

    def __init__(self, committed: int | None, high: int = 40) -> None:
        self.group_offset, self.high = committed, high

    def assignment(self):
        from confluent_kafka import TopicPartition

        return [TopicPartition(*TP)]

    def position(self, parts):
        return parts  # offset -1001: nothing consumed since the assignment

    def get_watermark_offsets(self, tp, cached: bool = False):
        return 0, self.high

    def committed(self, parts, timeout: float):
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if self.group_offset is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return [TopicPartition(p.topic, p.partition, self.group_offset) for p in parts]


@pytest.mark.parametrize(("group_offset", "stalls"), [(None, True), (39, False), (10, True)])
def test_the_lag_report_tells_an_idle_partition_from_one_whose_offset_fetch_never_returns(group_offset, stalls):
    from worker.observability.metrics import Metrics
    from worker.pipeline.progress import ProgressReports
    from worker.pipeline.tracker import OffsetTracker

    w, clock = watch(10)
    tracker = OffsetTracker()
    tracker.assign(TP)
    reports = ProgressReports(tracker, Metrics(), hold_warning_s=60.0, watch=w)
    reports.lag(Consumer(group_offset))
    clock.t += 11
    reports.lag(Consumer(group_offset))
    assert w.status()[0] is not stalls


def test_the_worker_is_unready_then_failed_by_a_stalled_partition():
    """The app's wiring: /readyz's reason (a health source of Worker.health) and the main loop's failure
    (Worker.failed)."""
    from worker.config.settings import load_settings
    from worker.pipeline.app import Worker
    from worker.pipeline.commitwatch import PartitionStalled

    settings = load_settings(environ={"RIBBON_MODEL__MODE": "digest", "RIBBON_SERVER__PORT": "0",
                                      "RIBBON_PIPELINE__PREPROCESS_PROCESSES": "0",
                                      "RIBBON_PIPELINE__STALL_TIMEOUT_S": "30"})
    worker = Worker(settings, "127.0.0.1:9")  # not started: no thread, no connection
    clock = Clock()
    worker.watch.clock = clock
    worker.shared.watch.observe({TP: State(None, None)})  # what ingest's lag report tells it
    assert worker.watch in worker.health_sources
    assert "partition in/3" not in worker.health().why and worker.failed() is None
    clock.t += 30
    h = worker.health()
    assert not h.ready and "partition in/3 has committed nothing for 30 s" in h.why and worker.failed() is None
    clock.t += 30
    assert isinstance(worker.failed(), PartitionStalled) and "partition in/3" in str(worker.failed())


class CountingConsumer(Consumer):
    """Two partitions nothing was read from; counts the group-offset fetches and what each asked."""

    def __init__(self, committed: int | None) -> None:
        super().__init__(committed)
        self.asked: list[list] = []

    def assignment(self):
        from confluent_kafka import TopicPartition

        return [TopicPartition("in", 3), TopicPartition("in", 4)]

    def committed(self, parts, timeout: float):
        self.asked.append(sorted((p.topic, p.partition) for p in parts))
        return super().committed(parts, timeout)


def _reports(clock):
    from worker.observability.metrics import Metrics
    from worker.pipeline.progress import ProgressReports
    from worker.pipeline.tracker import OffsetTracker

    tracker = OffsetTracker()
    for tp in (("in", 3), ("in", 4)):
        tracker.assign(tp)
    w = CommitWatch(60.0, clock)
    return ProgressReports(tracker, Metrics(), hold_warning_s=60.0, watch=w, clock=clock), tracker, w


def test_the_group_offset_is_fetched_once_per_assignment_not_every_tick():
    """The fetch blocks the ingest thread (up to its timeout): once for all the partitions of an
    assignment, then its answer is kept until the partition is assigned again."""
    clock = Clock()
    reports, tracker, w = _reports(clock)
    c = CountingConsumer(39)
    for _ in range(5):
        reports.lag(c)
        clock.t += 10
    assert c.asked == [[("in", 3), ("in", 4)]]
    assert w.status()[0]  # both idle at their group offset, one behind the high mark: not stalled
    tracker.revoke(("in", 4))
    tracker.assign(("in", 4))  # a new epoch: its group offset may have moved meanwhile
    reports.lag(c)
    reports.lag(c)
    assert c.asked == [[("in", 3), ("in", 4)], [("in", 4)]]


def test_an_unanswered_fetch_is_retried_after_a_pause_not_every_tick():
    from worker.pipeline.progress import COMMITTED_RETRY_S

    clock = Clock()
    reports, _, _ = _reports(clock)
    c = CountingConsumer(None)  # the fetch times out
    for _ in range(5):
        reports.lag(c)
        clock.t += COMMITTED_RETRY_S / 10
    assert len(c.asked) == 1
    clock.t += COMMITTED_RETRY_S
    reports.lag(c)
    assert len(c.asked) == 2
