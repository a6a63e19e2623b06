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

from worker.ops.errors import EXIT_USAGE, StartupError

log = logging.getLogger(__name__)

RIBBON_DLQ_HEADERS = frozenset({"error.class", "error.message", "source.topic", "source.partition",
                                "source.offset", "worker.version", "error.value_dropped"})
REPLAY_HEADER = "ribbon.replay.source"


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
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    parts = list(partitions)
    if since_ms is None:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[0] for p in parts}
    found = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in parts], timeout=timeout_s)
    out = {}
    for tp in found:
        high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout_s)[1]
        out[tp.partition] = high if tp.offset < 0 and tp.offset != OFFSET_BEGINNING else max(tp.offset, 0)
    return out


def read_bounded(consumer: Any, topic: str, starts: dict[int, int], ends: dict[int, int],
                 on_record: Callable[[Any], None], timeout_s: float) -> None:
    """Every record of `topic` from `starts` up to (not including) `ends`, by assign(); bounded in time."""
    from confluent_kafka import TopicPartition

    todo = {p for p in starts if starts[p] < ends[p]}
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in todo])
    deadline = time.monotonic() + timeout_s
    while todo:
        if time.monotonic() > deadline:
            raise StartupError(None, f"replay stopped: {topic} did not deliver up to its end offsets within "
                               f"{timeout_s:g} s (partitions left: {sorted(todo)})", exit_code=1)
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            if msg.error() is not None or msg.partition() not in todo:
                continue
            if msg.offset() < ends[msg.partition()]:
                on_record(msg)
            if msg.offset() + 1 >= ends[msg.partition()]:
                todo.discard(msg.partition())
    consumer.unassign()


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
    from confluent_kafka import Consumer, Producer
    from tqdm import tqdm

    conf = {**consumer_conf, "group.id": f"ribbon-replay-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "logger": logging.getLogger("librdkafka.consumer")}
    conf.pop("group.instance.id", None)
    consumer = Consumer(conf)
    producer = None if dry_run else Producer({
        **{k: v for k, v in producer_conf.items() if k != "transactional.id"},
        "logger": logging.getLogger("librdkafka.producer")})
    report, failures = ReplayReport(), []
    try:
        md = consumer.list_topics(dlq_topic, timeout=timeout_s).topics[dlq_topic]
        if md.error is not None:
            raise StartupError("kafka.dlq_topic", f"dead-letter topic {dlq_topic!r}: {md.error.str()}",
                               exit_code=1)
        from confluent_kafka import TopicPartition

        parts = sorted(md.partitions)
        starts = start_offsets(consumer, dlq_topic, parts, flt.since_ms, timeout_s)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(dlq_topic, p), timeout=timeout_s)[1] for p in parts}
        total = sum(max(0, ends[p] - starts[p]) for p in parts)
        with tqdm(total=total, desc=f"replay {dlq_topic}", unit="msg", disable=not progress) as bar:
            def on_record(msg: Any) -> None:
                bar.update(1)
                report.scanned += 1
                headers = dict((k, (v or b"").decode("utf-8", "replace")) for k, v in (msg.headers() or []))
                error_class = headers.get("error.class", "")
                if not flt.matches(error_class, msg.timestamp()[1]):
                    return
                report.matched += 1
                report.by_class[error_class] += 1
                target = to_topic or headers.get("source.topic")
                if not target:
                    failures.append(f"{msg.partition()}:{msg.offset()} has no source.topic header")
                    return
                report.by_target[target] += 1
                if producer is None:
                    return
                if msg.value() is None:
                    failures.append(f"{msg.partition()}:{msg.offset()} has no value (error.value_dropped)")
                    return
                kept = [(k, v) for k, v in (msg.headers() or []) if k not in RIBBON_DLQ_HEADERS]
                kept.append((REPLAY_HEADER, f"{dlq_topic}:{msg.partition()}:{msg.offset()}".encode()))
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
