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
