"""Shared fixtures: one embedded Kafka-protocol broker (Tansu) per test session."""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from worker.kafka.broker import EmbeddedBroker

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    with EmbeddedBroker(log_path=log_path) as b:
        yield b


@pytest.fixture
def new_topic(broker: EmbeddedBroker) -> Callable[..., str]:
    """Create a fresh topic with a unique name: new_topic("in", partitions=3)."""

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        broker.create_topics({name: partitions})
        return name

    return make


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0,
                isolation: str = "read_uncommitted") -> list:
    """Read `topic` from the start until `expected` messages arrived or the timeout passed."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation, "session.timeout.ms": 6000})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out.append(m)
    finally:
        c.close()
    return out
