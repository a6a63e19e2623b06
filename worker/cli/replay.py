"""`ribbon replay`: dead letters back to their input topic, and bounded re-runs into a separate group.

Dead letters (`replay dlq`): the dead-letter topic is read by assign() (no
group, nothing committed) from the first record at or after `--since` up to
the end offsets taken at start, so a replay is bounded even while new dead
letters arrive. Each record that passes the filters (error class, time range)
is produced to the topic its `source.topic` header names (or `--to-topic`)
with its original key and value; Ribbon's error headers are replaced by
`ribbon.replay.source` = `dlq-topic:partition:offset`. `--dry-run` counts
without producing.

Re-run (`replay rerun`): commits start offsets (from `--since` or
`--from-offset`) for a group that is not the live one, then runs the worker in
that group until its committed offsets reach the end offsets taken at start.
The live group's offsets are never touched.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import TopicPartition
from tqdm import tqdm

from worker.config.errors import EXIT_USAGE, StartupError
from worker.kafka import clients
from worker.kafka.headers import ERROR_CLASS, SOURCE_TOPIC, VALUE_DROPPED, replayed, ribbon_values

log = logging.getLogger(__name__)


def parse_time(text: str) -> int:
    """ISO 8601 (`2026-12-02T18:00:00Z`, naive = UTC) or epoch milliseconds -> epoch milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise StartupError(None, f"not a time: {text!r} (ISO 8601 such as 2026-12-02T18:00:00Z, "
                           "or epoch milliseconds)", exit_code=EXIT_USAGE) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


@dataclass
class ReplayReport:
    scanned: int = 0
    matched: int = 0
    produced: int = 0
    by_class: Counter = field(default_factory=Counter)
    by_target: Counter = field(default_factory=Counter)

    def line(self, dry_run: bool) -> str:
        classes = ", ".join(f"{k} {v}" for k, v in sorted(self.by_class.items())) or "none"
        verb = "would replay" if dry_run else "replayed"
        n = self.matched if dry_run else self.produced
        return f"{verb} {n} of {self.scanned} dead letters (by class: {classes})"


def start_offsets(consumer: Any, topic: str, partitions: Iterable[int], since_ms: int | None,
                  timeout_s: float) -> dict[int, int]:
    """First offset at or after `since_ms` per partition (the log start without it; the end if none)."""
    parts = list(partitions)
    if since_ms is None:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[0] for p in parts}
    found = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in parts], timeout=timeout_s)
    ends = end_offsets(consumer, topic, parts, timeout_s)
    # -1 (OFFSET_END): no record at or after since_ms
    starts = {tp.partition: ends[tp.partition] if tp.offset < 0 else tp.offset for tp in found}
    return _first_at_or_after(consumer, topic, starts, ends, since_ms, timeout_s)


def _first_at_or_after(consumer: Any, topic: str, starts: dict[int, int], ends: dict[int, int], since_ms: int,
                       timeout_s: float) -> dict[int, int]:
    """Step forward from the broker's answer to the first record stamped at or after `since_ms`.

    Apache Kafka's time index is exact (one record is read per partition); the embedded broker answers
    offset 0 to every time query, so there this is a scan of the partition.
    """
    out = dict(starts)
    todo = {p: o for p, o in starts.items() if o < ends[p]}

    def first(msg: Any) -> None:
        p = msg.partition()
        if p in todo and msg.timestamp()[1] >= since_ms:
            out[p] = msg.offset()
            del todo[p]

    for p in list(todo):
        out[p] = ends[p]  # none at or after since_ms unless found
    if todo:
        read_bounded(consumer, topic, dict(todo), ends, first, timeout_s, done=lambda: not todo)
    return out


def end_offsets(consumer: Any, topic: str, partitions: Iterable[int], timeout_s: float,
                idle_s: float = 1.0, scan_s: float = 5.0) -> dict[int, int]:
    """The end offset (last offset + 1) of each partition now.

    Apache Kafka's high watermark is the answer; the embedded broker (Tansu) reports the base offset of
    its last batch + 1 instead, so the tail from there is read as well (until no record came for `idle_s`,
    `scan_s` at most): exact on both, and at most one batch more work.
    """
    parts = list(partitions)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1] for p in parts}
    tail = [TopicPartition(topic, p, ends[p] - 1) for p in parts if ends[p] > 0]
    if not tail:
        return ends
    consumer.assign(tail)
    start = last = time.monotonic()
    while time.monotonic() - last < idle_s and time.monotonic() - start < scan_s:
        for msg in consumer.consume(num_messages=500, timeout=0.2):
            if msg.error() is None:
                ends[msg.partition()] = max(ends[msg.partition()], msg.offset() + 1)
                last = time.monotonic()
    consumer.unassign()
    return ends


def read_bounded(consumer: Any, topic: str, starts: dict[int, int], ends: dict[int, int],
                 on_record: Callable[[Any], None], timeout_s: float,
                 done: Callable[[], bool] = lambda: False) -> None:
    """Every record of `topic` from `starts` up to (not including) `ends`, by assign(); bounded in time.

    A partition is finished when the consumer's position reaches its end, not when a record at
    `end - 1` arrives: on a topic written in transactions the last offset is a commit marker, which
    no consumer is ever given (and under read_committed aborted records are skipped as well).
    `done()` true stops early."""
    todo = {p for p in starts if starts[p] < ends[p]}
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in todo])
    deadline = time.monotonic() + timeout_s
    try:
        while todo and not done():
            if time.monotonic() > deadline:
                raise StartupError(None, f"replay stopped: {topic} did not deliver up to its end offsets within "
                                   f"{timeout_s:g} s (partitions left: {sorted(todo)})", exit_code=1)
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None and msg.partition() in todo and msg.offset() < ends[msg.partition()]:
                    on_record(msg)
            todo -= reached(consumer, topic, todo, ends)
    finally:
        consumer.unassign()


def reached(consumer: Any, topic: str, parts: Iterable[int], ends: dict[int, int]) -> set[int]:
    """The partitions whose consumer position is at or past their end offset."""
    positions = consumer.position([TopicPartition(topic, p) for p in parts])
    return {tp.partition for tp in positions if tp.offset >= 0 and tp.offset >= ends[tp.partition]}


@dataclass(frozen=True)
class DlqFilter:
    classes: frozenset[str] = frozenset()  # empty: every class
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, error_class: str, timestamp_ms: int) -> bool:
        if self.classes and error_class not in self.classes:
            return False
        if self.since_ms is not None and timestamp_ms < self.since_ms:
            return False
        return self.until_ms is None or timestamp_ms < self.until_ms


def replay_dlq(consumer_conf: dict[str, Any], producer_conf: dict[str, Any], dlq_topic: str, flt: DlqFilter,
               to_topic: str | None, dry_run: bool, progress: bool, timeout_s: float) -> ReplayReport:
    """Scan the dead-letter topic once (bounded) and produce the matching records back."""
    conf = {**consumer_conf, "group.id": f"ribbon-replay-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    conf.pop("group.instance.id", None)
    consumer = clients.consumer(conf)
    producer = None if dry_run else clients.producer(
        {k: v for k, v in producer_conf.items() if k != "transactional.id"})
    report, failures = ReplayReport(), []
    try:
        md = consumer.list_topics(dlq_topic, timeout=timeout_s).topics[dlq_topic]
        if md.error is not None:
            raise StartupError("kafka.dlq_topic", f"dead-letter topic {dlq_topic!r}: {md.error.str()}",
                               exit_code=1)
        parts = sorted(md.partitions)
        starts = start_offsets(consumer, dlq_topic, parts, flt.since_ms, timeout_s)
        ends = end_offsets(consumer, dlq_topic, parts, timeout_s)
        total = sum(max(0, ends[p] - starts[p]) for p in parts)
        with tqdm(total=total, desc=f"replay {dlq_topic}", unit="msg", disable=not progress) as bar:
            def on_record(msg: Any) -> None:
                bar.update(1)
                report.scanned += 1
                headers = ribbon_values(msg.headers())
                error_class = headers.get(ERROR_CLASS, "")
                if not flt.matches(error_class, msg.timestamp()[1]):
                    return
                report.matched += 1
                report.by_class[error_class] += 1
                target = to_topic or headers.get(SOURCE_TOPIC)
                if not target:
                    failures.append(f"{msg.partition()}:{msg.offset()} has no {SOURCE_TOPIC} header")
                    return
                report.by_target[target] += 1
                if producer is None:
                    return
                if msg.value() is None:
                    failures.append(f"{msg.partition()}:{msg.offset()} has no value ({VALUE_DROPPED})")
                    return
                kept = replayed(msg.headers(), dlq_topic, msg.partition(), msg.offset())
                producer.produce(target, value=msg.value(), key=msg.key(), headers=kept, on_delivery=on_delivery)
                producer.poll(0)

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is None:
                    report.produced += 1
                else:
                    failures.append(str(err))

            read_bounded(consumer, dlq_topic, starts, ends, on_record, timeout_s)
            if producer is not None:
                left = producer.flush(timeout_s)
                if left:
                    failures.append(f"{left} records not acknowledged within {timeout_s:g} s")
    finally:
        consumer.close()
    if failures:
        raise StartupError(None, f"{report.line(dry_run)}; {len(failures)} failed, first: {failures[0]}",
                           exit_code=1)
    return report
