"""Shared fixtures: one embedded Kafka-protocol broker (Tansu) per test session."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from worker.kafka.broker import EmbeddedBroker

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    with EmbeddedBroker(log_path=log_path) as b:
        yield b


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of this test alone: for tests that freeze it (SIGSTOP) or stop it."""
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as b:
        yield b


@pytest.fixture
def new_topic(broker: EmbeddedBroker) -> Callable[..., str]:
    """Create a fresh topic with a unique name: new_topic("in", partitions=3)."""

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        broker.create_topics({name: partitions})
        return name

    return make


# ---- the worker under test -------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random Qwen2 checkpoint, saved and loaded through the real loader."""
    from worker.engine.tiny import make_tiny_checkpoint

    return str(make_tiny_checkpoint(tmp_path_factory.mktemp("model") / "tiny-qwen2", arch="qwen2", seed=0))
