"""The Kafka clients, built in one place from worker.kafka.config's properties.

Stages never construct clients: the app injects a factory (`Clients.consumer`,
`Clients.producer`), which the owning thread calls, so each stage can be unit-
tested with a fake client. librdkafka's own log lines go through `logging`
(`librdkafka.consumer`, `librdkafka.producer`, `librdkafka.admin`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from worker.kafka.config import ClientConfig


def consumer(conf: dict[str, Any]):
    return Consumer(conf, logger=logging.getLogger("librdkafka.consumer"))


def producer(conf: dict[str, Any]):
    return Producer(conf, logger=logging.getLogger("librdkafka.producer"))


def admin(conf: dict[str, Any]):
    return AdminClient(conf, logger=logging.getLogger("librdkafka.admin"))


@dataclass(frozen=True)
class Clients:
    """Factories of the worker's clients for one cluster (each called on the thread that owns the client)."""

    config: ClientConfig

    def consumer(self):
        return consumer(self.config.consumer)

    def producer(self):
        return producer(self.config.producer)

    def admin(self):
        return admin(self.config.common)


Factory = Callable[[], Any]


def take(consumer, most: int, timeout_s: float) -> list:
    """Up to `most` messages, returning as soon as there is one.

    `Consumer.consume(n, timeout)` waits until it has n messages or the timeout passes: under a
    steady trickle that is the whole timeout every call, added to every message's latency. Here
    what is already fetched is taken at once; only with nothing there does the call wait, and
    it returns at the first message (plus whatever arrived with it)."""
    msgs = consumer.consume(num_messages=most, timeout=0)
    if msgs or timeout_s <= 0:
        return msgs
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=most - 1, timeout=0)] if most > 1 else [first]


RESET_BEGINNING = frozenset({"earliest", "smallest", "beginning"})
RESET_END = frozenset({"latest", "largest", "end"})
COMMITTED_TIMEOUT_S = 10.0  # the committed-offset lookup in an assignment; past it, librdkafka's own path


def start_positions(consumer, partitions: list, reset: str, timeout_s: float = COMMITTED_TIMEOUT_S) -> list:
    """Newly assigned partitions, each with the offset to start from: its committed offset, or the
    end that `reset` (auto.offset.reset) names when the group has none.

    librdkafka finds both on its own, but for a partition without a committed offset it arms a
    fixed 100 ms timer before it asks for the reset offset (rdkafka_offset.c, rd_kafka_offset_reset:
    the backoff is 100 ms whenever the reset has a cause, and "no committed offset" is one): a new
    group's first start on a backlog waited that long for its first message. Asked here (one
    OffsetFetch), the committed offsets go to the assignment as they are, and a logical BEGINNING
    or END is looked up at once. Any failure, or a reset policy of "error", returns the partitions
    as given, to librdkafka's own path."""
    logical = OFFSET_BEGINNING if reset in RESET_BEGINNING else OFFSET_END if reset in RESET_END else None
    if logical is None or not partitions:
        return partitions
    try:
        committed = consumer.committed([TopicPartition(p.topic, p.partition) for p in partitions], timeout=timeout_s)
    except (KafkaException, RuntimeError):
        return partitions
    out = []
    for c in committed:
        if c.error is not None:
            return partitions
        out.append(c if c.offset >= 0 else TopicPartition(c.topic, c.partition, logical))
    return out
