"""The worker against Apache Kafka (testcontainers): what Tansu cannot show.

Apache Kafka hides aborted transactional records from read_committed
consumers, so here exactly-once is strict: every input id appears once, with
no repeats, even after kill -9 and a broker outage. The broker is Confluent's
cp-kafka image (Apache Kafka, KRaft, one node) as testcontainers' KafkaContainer
starts it, with the transaction state log sized for one node.

Without Docker or testcontainers (`pip install -e '.[docker]'`) every test here
is skipped with the reason; `pytest -rs` lists it.
"""

from __future__ import annotations

import gc
import json
import random
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema
import orjson
import pytest
from helpers import by_id, consume_all, mixed_docs, produce, start_worker, topics, worker_env

ROOT = Path(__file__).resolve().parents[2]
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"  # Apache Kafka 3.6; KafkaContainer's start script needs this layout

pytestmark = [pytest.mark.kafka_docker, pytest.mark.slow]


def _kafka_container_class() -> type:
    """KafkaContainer, or skip (visibly) saying what is missing."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # third-party import noise, not our failure
            try:
                from testcontainers.community.kafka import KafkaContainer  # testcontainers >= 4.15
            except ImportError:
                from testcontainers.kafka import KafkaContainer  # earlier 4.x
            import docker
    except ImportError as exc:
        pytest.skip(f"testcontainers not installed ({exc.name}): Apache Kafka tests need it "
                    "(pip install -e '.[docker]')")
    with warnings.catch_warnings():
        # a failed connection leaves the SDK's socket to the collector: finalize it here, quietly
        warnings.simplefilter("ignore", ResourceWarning)
        problem = _docker_problem(docker)
        gc.collect()
    if problem:
        pytest.skip(f"Docker not available: Apache Kafka tests need it ({problem})"[:300])
    return KafkaContainer


def _docker_problem(docker) -> str | None:
    """None if the Docker daemon answers a ping, else why not."""
    try:
        client = docker.from_env()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the daemon means "no Docker": say which
        return f"{type(exc).__name__}: {exc}"
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001 - same
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def kafka() -> Iterator[object]:
    """One Apache Kafka container for this module (session scope, so the skip comes before any model is built)."""
    container = (_kafka_container_class()(KAFKA_IMAGE).with_kraft()
                 .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                 .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        container.start(timeout=180)
    try:
        yield container
    finally:
        container.stop()


@pytest.fixture
def bootstrap(kafka) -> str:
    return kafka.get_bootstrap_server()


@pytest.fixture
def new_topic(bootstrap: str) -> Callable[..., str]:
    """Overrides conftest's Tansu `new_topic`: a fresh topic on Apache Kafka, new_topic("in", partitions=3)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
        return name

    return make


# ---- checks ---------------------------------------------------------------------------------

def committed_outputs(bootstrap: str, topic: str, n_ids: int, timeout_s: float) -> list:
    """read_committed outputs once `n_ids` distinct ids arrived (or the timeout), plus anything late."""
    deadline = time.monotonic() + timeout_s
    got = consume_all(bootstrap, topic, n_ids, timeout_s=min(60.0, timeout_s), isolation="read_committed")
    while len(by_id(got)) < n_ids and time.monotonic() < deadline:  # repeats count too: ask for more
        got = consume_all(bootstrap, topic, max(n_ids, len(got) + 1), timeout_s=10, isolation="read_committed")
    # one more record than expected would be a repeat: give it time to show
    return consume_all(bootstrap, topic, len(got) + 1, timeout_s=10, isolation="read_committed")


def assert_exactly_once(got: list, ids: set[str]) -> None:
    outs = by_id(got)
    missing = ids - set(outs)
    assert not missing, f"{len(missing)} inputs without a summary, e.g. {sorted(missing)[:5]}"
    repeated = {k: len(v) for k, v in outs.items() if len(v) > 1}
    assert not repeated, f"{len(repeated)} ids repeated under read_committed, e.g. {list(repeated.items())[:5]}"
    assert set(outs) == ids and len(got) == len(ids)


def stop(proc, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(120)
    assert rc == 0, log.read_text()[-3000:]


# ---- scenarios ------------------------------------------------------------------------------

def test_two_thousand_documents_exactly_once(kafka, bootstrap, new_topic, tiny_model, tmp_path):
    t = topics(new_topic)
    docs = mixed_docs(2000, seed=11)
    produce(bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    log = tmp_path / "worker.log"
    proc = start_worker(worker_env(bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t), log)
    try:
        got = committed_outputs(bootstrap, t["output_topic"], len(docs), timeout_s=400)
    finally:
        stop(proc, log)
    assert_exactly_once(got, {d["id"] for d in docs})
    schema = json.loads((ROOT / "schemas" / "output.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)  # checks the schema once, not per output
    validator.check_schema(schema)
    coords = set()
    for m in got:
        o = orjson.loads(m.value())
        validator.validate(o)
        assert o["input"]["topic"] == t["input_topic"]
        coords.add((o["input"]["partition"], o["input"]["offset"]))
    assert len(coords) == len(docs)
    assert consume_all(bootstrap, t["dlq_topic"], 1, timeout_s=3) == []


def _trickle(bootstrap: str, topic: str, docs: list[dict], errors: list, chunks: int = 20) -> None:
    """Produce `docs` in chunks over ~10 s, so the kills land while documents still arrive."""
    try:
        step = -(-len(docs) // chunks)
        for start in range(0, len(docs), step):
            part = docs[start:start + step]
            produce(bootstrap, topic, [orjson.dumps(d) for d in part],
                    [f"k{start + i}".encode() for i in range(len(part))])
            time.sleep(0.5)
    except BaseException as exc:  # noqa: BLE001 - re-raised by the test thread
        errors.append(exc)


def test_kill_9_five_times_exactly_once_under_read_committed(kafka, bootstrap, new_topic, tiny_model, tmp_path):
    rng = random.Random(17)
    t = topics(new_topic)
    docs = mixed_docs(2000, seed=12)
    env = worker_env(bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t)
    log = tmp_path / "worker.log"
    errors: list = []
    feeder = threading.Thread(target=_trickle, args=(bootstrap, t["input_topic"], docs, errors), daemon=True)
    feeder.start()
    kills, seen = 0, 0
    while kills < 5:
        proc = start_worker(env, log)
        target = seen + rng.randint(50, 250)
        deadline = time.monotonic() + rng.uniform(5, 25)  # sometimes during start-up, mostly mid-stream
        while time.monotonic() < deadline:
            seen = len(consume_all(bootstrap, t["output_topic"], target, timeout_s=1, isolation="read_committed"))
            if seen >= target:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        kills += 1
    feeder.join(120)
    assert not errors, errors
    proc = start_worker(env, log)
    try:
        got = committed_outputs(bootstrap, t["output_topic"], len(docs), timeout_s=400)
    finally:
        stop(proc, log)
    assert kills == 5
    assert_exactly_once(got, {d["id"] for d in docs})


def test_broker_down_ten_seconds_mid_stream(kafka, bootstrap, new_topic, tiny_model, tmp_path):
    t = topics(new_topic)
    docs = mixed_docs(2000, seed=13)
    produce(bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    log = tmp_path / "worker.log"
    proc = start_worker(worker_env(bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t), log)
    try:
        consume_all(bootstrap, t["output_topic"], 200, timeout_s=180, isolation="read_committed")  # mid-stream
        broker = kafka.get_wrapped_container()
        broker.pause()  # the broker stops answering: connections hang, as in a network partition
        try:
            time.sleep(10)
            assert proc.poll() is None, "the worker died while the broker was away"
        finally:
            broker.unpause()
        got = committed_outputs(bootstrap, t["output_topic"], len(docs), timeout_s=400)
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        stop(proc, log)
    assert_exactly_once(got, {d["id"] for d in docs})


# ---- what only Apache Kafka shows (issue 12) ------------------------------------------------

def _supervise(env: dict, log: Path, until: Callable[[], bool], timeout_s: float) -> list[int]:
    """Run the worker as a supervisor would: restart it whenever it exits, until `until()`; the exit codes."""
    codes: list[int] = []
    deadline = time.monotonic() + timeout_s
    proc = start_worker(env, log)
    try:
        while not until() and time.monotonic() < deadline:
            if proc.poll() is not None:
                codes.append(proc.returncode)
                proc = start_worker(env, log)
            time.sleep(1)
    finally:
        stop(proc, log)
    return codes


def test_a_transaction_the_broker_times_out_is_redone_exactly_once(kafka, bootstrap, new_topic, tiny_model, tmp_path):
    """Apache Kafka aborts a transaction older than transaction.timeout.ms (Tansu never does). The broker is
    frozen past it with a transaction open: the worker either goes on or exits 1 (delivery stuck, fenced) and
    is restarted; either way every input is summarized exactly once under read_committed."""
    t = topics(new_topic)
    docs = mixed_docs(1500, seed=14)
    produce(bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    log = tmp_path / "worker.log"
    env = worker_env(bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t,
                     RIBBON_KAFKA__PRODUCER_EXTRA='{"transaction.timeout.ms": 5000}',
                     RIBBON_KAFKA__DELIVERY_STUCK_S="24")  # each transactional call: 24 / 12 = 2 s at most
    frozen_once = threading.Event()

    def freeze_mid_stream() -> None:
        consume_all(bootstrap, t["output_topic"], 200, timeout_s=180, isolation="read_committed")
        broker = kafka.get_wrapped_container()
        broker.pause()
        try:
            time.sleep(15)  # three transaction timeouts
        finally:
            broker.unpause()
            frozen_once.set()

    freezer = threading.Thread(target=freeze_mid_stream, daemon=True)
    freezer.start()
    done = lambda: frozen_once.is_set() and len(by_id(consume_all(  # noqa: E731
        bootstrap, t["output_topic"], len(docs), timeout_s=5, isolation="read_committed"))) >= len(docs)
    codes = _supervise(env, log, done, timeout_s=500)
    freezer.join(5)
    assert frozen_once.is_set()
    assert all(c == 1 for c in codes), f"a restart must follow a clean exit 1, got {codes}"
    got = committed_outputs(bootstrap, t["output_topic"], len(docs), timeout_s=60)
    assert_exactly_once(got, {d["id"] for d in docs})


def test_a_dead_letter_above_the_topic_limit_goes_without_its_value(kafka, bootstrap, tiny_model, tmp_path):
    """The dead-letter topic refuses records above its max.message.bytes (Tansu accepts any size): the record
    goes without its value (header error.value_dropped), and nothing behind it stalls."""
    from confluent_kafka.admin import AdminClient, NewTopic

    names = {"input_topic": f"in-{uuid.uuid4().hex[:8]}", "output_topic": f"out-{uuid.uuid4().hex[:8]}",
             "dlq_topic": f"dlq-{uuid.uuid4().hex[:8]}"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(names["input_topic"], 1, 1), NewTopic(names["output_topic"], 1, 1),
                                   NewTopic(names["dlq_topic"], 1, 1, config={"max.message.bytes": "100000"})])
    for f in futures.values():
        f.result(60)
    docs = mixed_docs(50, seed=15)
    values = [orjson.dumps(d) for d in docs[:25]] + [b"\xff" * 300_000] + [orjson.dumps(d) for d in docs[25:]]
    produce(bootstrap, names["input_topic"], values)
    log = tmp_path / "worker.log"
    group = f"g-{uuid.uuid4().hex[:8]}"
    proc = start_worker(worker_env(bootstrap, tiny_model, group=group, **names), log)
    try:
        got = committed_outputs(bootstrap, names["output_topic"], len(docs), timeout_s=300)
        dlq = consume_all(bootstrap, names["dlq_topic"], 1, timeout_s=60, isolation="read_committed")
    finally:
        stop(proc, log)
    assert_exactly_once(got, {d["id"] for d in docs})
    assert len(dlq) == 1 and dlq[0].value() is None
    headers = dict(dlq[0].headers())
    assert headers["error.class"] == b"invalid_utf8" and headers["error.value_dropped"] == b"msg_size_too_large"
    assert headers["source.offset"] == b"25"
