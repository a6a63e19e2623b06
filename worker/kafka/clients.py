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

from worker.kafka.config import ClientConfig


def consumer(conf: dict[str, Any]):
    from confluent_kafka import Consumer

    return Consumer(conf, logger=logging.getLogger("librdkafka.consumer"))


def producer(conf: dict[str, Any]):
    from confluent_kafka import Producer

    return Producer(conf, logger=logging.getLogger("librdkafka.producer"))


def admin(conf: dict[str, Any]):
    from confluent_kafka.admin import AdminClient

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
