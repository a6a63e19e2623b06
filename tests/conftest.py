"""Shared fixtures: one embedded Kafka-protocol broker (Tansu) per test session, and Apache Kafka.

`broker` / `new_topic` are Tansu (every integration test). `kafka` is one
Apache Kafka node from Maven Central jars (tests/apache_kafka.py) for the
session; `cluster` is either, chosen by a test's parameter (`on_both_brokers`
in helpers.py runs a test on each), and `cluster_topic` makes topics on it. Without java or
mvn the Apache Kafka tests are skipped with the reason; under CI (CI=true) a
broker that cannot be fetched or started fails them.

The suite runs in parallel (pytest-xdist, `make test`): a session is one xdist worker, so each
worker has its own Tansu broker, its own Apache Kafka node (started on its first Apache Kafka test)
and its own tiny model; no broker is shared between workers. Brokers listen on free ports picked
by the kernel; a port taken by another process between the pick and the broker's bind is picked
again (`started`). Tests are handed out one at a time to the worker that is free, except that the
tests of a module defining a module-scoped fixture go to one worker together, so the fixture is
built once (`pytest_xdist_make_scheduler`). The tests that run a worker process (`tiny_model`,
`slow`, `kafka_apache`) are handed out first: the longest waits overlap with the rest instead of
ending the run.
"""

from __future__ import annotations

import functools
import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from worker.kafka.broker import BrokerError, EmbeddedBroker

_counter = itertools.count()
PORT_ATTEMPTS = 3  # a free port picked by the kernel can be taken by another process before the broker binds it


def _runs_a_worker(item: pytest.Item) -> bool:
    return "tiny_model" in item.fixturenames or any(item.get_closest_marker(m) for m in ("slow", "kafka_apache"))


@functools.cache
def _module_fixture(path: Path) -> bool:
    """Whether the test module at `path` defines a module-scoped fixture."""
    return path.suffix == ".py" and 'scope="module"' in path.read_text(encoding="utf-8")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: called only when the suite runs under it
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scheduling by scope, a scope being one test, or a whole module that defines a
    module-scoped fixture; each worker takes the next scope when it has at most two tests left."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if _module_fixture(config.rootpath / module) else nodeid

    return ModuleFixtureScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the tests that run a worker first."""
    if config.pluginmanager.hasplugin("xdist"):
        items.sort(key=lambda item: not _runs_a_worker(item))  # stable: the rest keep their order


def started(make: Callable[[], object]):
    """make().start(), on another free port when the first was taken (BrokerError) in the meantime."""
    for _ in range(PORT_ATTEMPTS - 1):
        try:
            return make().start()
        except BrokerError:
            pass
    return make().start()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    with started(lambda: EmbeddedBroker(log_path=log_path)) as b:
        yield b


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of this test alone: for tests that freeze it (SIGSTOP) or stop it."""
    with started(lambda: EmbeddedBroker(log_path=tmp_path / "tansu.log")) as b:
        yield b


def topic_maker(b) -> Callable[..., str]:
    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
        b.create_topics({name: partitions})
        return name

    return make


@pytest.fixture
def new_topic(broker: EmbeddedBroker) -> Callable[..., str]:
    """Create a fresh topic with a unique name: new_topic("in", partitions=3)."""
    return topic_maker(broker)


# ---- Apache Kafka (KRaft, from Maven Central jars) ------------------------------------------

def apache_kafka_or_skip(log_path: Path, overrides: dict[str, str] | None = None):
    """A started ApacheKafka; without java/mvn a visible skip, but a failure under CI=true."""
    from apache_kafka import ApacheKafka, jars_dir

    try:
        jars_dir()  # fetched once (a failure here is not retried)
        return started(lambda: ApacheKafka(log_path=log_path, overrides=overrides))
    except BrokerError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"Apache Kafka is required in CI: {exc}")
        pytest.skip(f"Apache Kafka unavailable: {exc}"[:400])


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory):
    """One Apache Kafka node for the session."""
    b = apache_kafka_or_skip(tmp_path_factory.mktemp("kafka") / "kafka.log")
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def private_kafka(tmp_path: Path):
    """An Apache Kafka node of this test alone (to freeze or stop), with broker settings of its own:
    private_kafka(**{"transaction.max.timeout.ms": "10000"})."""
    started = []

    def make(**overrides: str):
        started.append(apache_kafka_or_skip(tmp_path / f"kafka{len(started)}.log", overrides))
        return started[-1]

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def cluster(request: pytest.FixtureRequest):
    """The broker a test runs on: "tansu" (default) or "apache", by indirect parametrization."""
    which = getattr(request, "param", "tansu")
    return request.getfixturevalue("kafka" if which == "apache" else "broker")


@pytest.fixture
def cluster_topic(cluster) -> Callable[..., str]:
    """new_topic on the test's `cluster`."""
    return topic_maker(cluster)


# ---- the worker under test -------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random Qwen2 checkpoint, saved and loaded through the real loader."""
    from worker.engine.tiny import make_tiny_checkpoint

    return str(make_tiny_checkpoint(tmp_path_factory.mktemp("model") / "tiny-qwen2", arch="qwen2", seed=0))
