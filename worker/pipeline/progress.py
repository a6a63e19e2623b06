"""Progress reports, made on the ingest thread (which owns the consumer) every pipeline.lag_interval_s.

- `lag(consumer)`: per partition, the end offset less the committed one (`ribbon_consumer_lag_messages`)
  and what is fetched but unfinished (`ribbon_fetched_unfinished_messages`); the same states go to the
  commit watch (worker/pipeline/commitwatch.py), which tells a stalled partition from an idle one; a
  partition nothing was read from takes the group's committed offset, fetched once per assignment
  for all such partitions together (a blocking call of at most COMMITTED_TIMEOUT_S), kept until the
  partition is assigned again, and retried after COMMITTED_RETRY_S when the broker did not answer;
- `held()`: how long each partition's oldest unfinished input has held its commits
  (`ribbon_held_partition_seconds`), and one warning per input past kafka.hold_warning_s.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException, TopicPartition

from worker.pipeline.commitwatch import CommitWatch, State

log = logging.getLogger("worker.pipeline.ingest")  # the ingest thread's reports, under its logger

COMMITTED_TIMEOUT_S = 1.0  # the group's committed offsets, asked only for partitions nothing was read from yet
COMMITTED_RETRY_S = 30.0  # after a fetch that was not answered, the next one waits this long


class ProgressReports:
    def __init__(self, tracker, metrics, hold_warning_s: float, watch: CommitWatch | None = None,
                 clock=time.monotonic) -> None:
        self.tracker, self.metrics, self.hold_warning_s = tracker, metrics, hold_warning_s
        self.watch = watch  # told each partition's state every round (worker/pipeline/commitwatch.py)
        self._warned: set[tuple] = set()  # (tp, epoch, offset) already logged as slow
        self._clock = clock
        self._group: dict[tuple, int] = {}  # (tp, epoch) -> the group's offset (or the low mark: none committed)
        self._ask_at: dict[tuple, float] = {}  # (tp, epoch) -> not asked again before (its fetch gave nothing)

    def lag(self, consumer) -> None:
        """Per partition: lag against the committed offset, and what is fetched but unfinished.

        The high watermark is librdkafka's cached one (no round trip); the committed offset is the
        tracker's (where this assignment resumed, then what delivery committed since), so a partition
        whose documents sit in the packer or on the model still shows them as lag.
        """
        parts = consumer.assignment()
        states: dict = {}
        for tp in consumer.position(parts) if parts else ():
            key = (tp.topic, tp.partition)
            committed, unfinished = self.tracker.progress(key)
            try:
                _, high = consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # noqa: BLE001 - no statistics yet for this partition: its lag is unknown
                high = -1
            start = committed if committed is not None else tp.offset  # nothing fetched: position = committed
            states[key] = State(start if start is not None and start >= 0 else None, high if high >= 0 else None,
                                unfinished)
            if high >= 0 and start is not None and start >= 0:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - start))
            self.metrics.unfinished.labels(tp.topic, str(tp.partition)).set(unfinished)
        if self.watch is not None:
            self.watch.observe(self._group_committed(consumer, states))

    def _group_committed(self, consumer, states: dict) -> dict:
        """Partitions nothing was read from since their assignment (an idle one, or one whose offset fetch
        never returned) take the group's committed offset, asked with a short timeout: known and at most
        one offset behind the high watermark, such a partition is idle, not stalled."""
        unknown = {tp: (tp, self.tracker.epoch(tp)) for tp, st in states.items() if st.committed is None}
        keys = set(unknown.values())  # this assignment's only: a partition assigned again is asked again
        self._group = {k: v for k, v in self._group.items() if k in keys}
        self._ask_at = {k: v for k, v in self._ask_at.items() if k in keys}
        now = self._clock()
        ask = [tp for tp, k in unknown.items() if k not in self._group and now >= self._ask_at.get(k, now)]
        if ask:
            self._fetch(consumer, {tp: unknown[tp] for tp in ask}, states)
            for tp in ask:
                if unknown[tp] not in self._group:  # not answered, or no low mark yet: not before a pause
                    self._ask_at[unknown[tp]] = now + COMMITTED_RETRY_S
        for tp, k in unknown.items():
            offset, st = self._group.get(k), states[tp]
            if offset is not None:
                states[tp] = State(offset, st.high, st.unfinished)
        return states

    def _fetch(self, consumer, keys: dict, states: dict) -> None:
        """One blocking fetch of the group's offsets of the partitions `keys` names; the answers kept
        per (tp, epoch). Not answered: the partitions stay unknown (behind)."""
        try:
            got = consumer.committed([TopicPartition(t, p) for t, p in keys], timeout=COMMITTED_TIMEOUT_S)
        except KafkaException:
            return
        for tp in got:
            key = (tp.topic, tp.partition)
            if tp.error is None and tp.offset >= 0:
                self._group[keys[key]] = tp.offset
            elif tp.error is None and states[key].high is not None:  # nothing committed yet: the low mark
                low = self._low(consumer, tp)
                if low is not None:
                    self._group[keys[key]] = low

    @staticmethod
    def _low(consumer, tp) -> int | None:
        try:
            low, _ = consumer.get_watermark_offsets(tp, cached=True)
        except Exception:  # noqa: BLE001 - no statistics for it yet
            return None
        return low if low >= 0 else None

    def held(self) -> None:
        """How long each partition's oldest unfinished input has held its commits; one warning per input
        past kafka.hold_warning_s, naming it (docs/operating.md, "A slow document holds its partition")."""
        limit = self.hold_warning_s
        holding = self.tracker.holding()
        for (topic, part), offset, age in holding:
            self.metrics.held.labels(topic, str(part)).set(age)
            key = ((topic, part), self.tracker.epoch((topic, part)), offset)
            if age >= limit and key not in self._warned:
                self._warned.add(key)
                self.metrics.slow_documents.inc()
                log.warning("input %s/%d@%d has held its partition's commits for %.0f s (kafka.hold_warning_s "
                            "%.0f s)", topic, part, offset, age, limit,
                            extra={"topic": topic, "partition": part, "offset": offset, "held_s": round(age, 1)})
        held = {tp for tp, _, _ in holding}
        for tp in self.tracker.partitions():
            if tp not in held:
                self.metrics.held.labels(tp[0], str(tp[1])).set(0)
        self._warned = {k for k in self._warned if (k[0], k[2]) in {(tp, off) for tp, off, _ in holding}}
