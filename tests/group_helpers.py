"""Consumer-group helpers of the whole-worker tests: a fast group, committed offsets, waiting for an assignment."""

from __future__ import annotations

import time
from pathlib import Path




# a killed member leaves the group quickly
FAST_GROUP = {"RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 2000, "heartbeat.interval.ms": 400}'}


def wait_for_assignment(proc, log: Path, since: int, timeout_s: float) -> bool:
    """True once the worker logged a non-empty assignment after byte `since` of its log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.is_alive():
        with open(log, "rb") as fh:
            fh.seek(since)
            if b"assigned [(" in fh.read():
                return True
        time.sleep(0.05)
    return False


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's stable committed offsets. read_uncommitted: with read_committed (librdkafka's default) the
    lookup waits while a transaction holding offsets is open, as a killed worker's is on Apache Kafka until
    its successor fences it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_uncommitted"})
    try:
        return [max(tp.offset, 0) for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                         timeout=10)]
    finally:
        c.close()
