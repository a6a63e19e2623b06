"""Helpers shared by the integration tests: produce, consume, start workers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from worker.kafka import clients
from worker.kafka.config import plain_config
from worker.demo.samples import document

ROOT = Path(__file__).resolve().parents[1]

# Run a test on Tansu and on Apache Kafka (conftest's `cluster` fixture); the test takes `cluster` and
# `cluster_topic`. Tansu shows aborted records to read_committed readers; Apache Kafka does not.
on_both_brokers = pytest.mark.parametrize(
    "cluster", ["tansu", pytest.param("apache", marks=pytest.mark.kafka_apache)], indirect=True)
on_apache_kafka = pytest.mark.parametrize(
    "cluster", [pytest.param("apache", marks=pytest.mark.kafka_apache)], indirect=True)


def is_apache(cluster) -> bool:
    """The test's `cluster` is Apache Kafka (read_committed never shows an aborted record: checks can be strict)."""
    return type(cluster).__name__ == "ApacheKafka"


def reader(bootstrap: str, group: str, isolation: str = "read_uncommitted"):
    """A checking consumer, built where every client is (worker/kafka/config.py, worker/kafka/clients.py)."""
    return clients.consumer(plain_config(bootstrap).tool_consumer(
        group, **{"isolation.level": isolation, "session.timeout.ms": 6000}))


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0,
                isolation: str = "read_uncommitted") -> list:
    """Read `topic` from the start until `expected` messages arrived or the timeout passed."""
    c = reader(bootstrap, f"check-{uuid.uuid4().hex}", isolation)
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


def worker_env(bootstrap: str, model: str, *, input_topic: str, output_topic: str, dlq_topic: str,
               group: str, slot: int = 0, delivery: str = "exactly_once", **extra: str) -> dict[str, str]:
    """The environment of a worker process: every setting through its RIBBON_ variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env.update({
        "RIBBON_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": input_topic,
        "RIBBON_KAFKA__OUTPUT_TOPIC": output_topic, "RIBBON_KAFKA__DLQ_TOPIC": dlq_topic,
        "RIBBON_KAFKA__GROUP_ID": group, "RIBBON_KAFKA__WORKER_SLOT": str(slot),
        "RIBBON_KAFKA__DELIVERY": delivery, "RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 6000}',
        "RIBBON_MODEL__PATH": model, "RIBBON_GENERATION__MAX_NEW_TOKENS": "4", "RIBBON_ENGINE__DEVICE": "cpu",
        "RIBBON_BATCHING__TOKEN_BUDGET": "4096", "RIBBON_BATCHING__MAX_WAIT_MS": "20",
        "RIBBON_SERVER__PORT": "0", "RIBBON_LOG_FORMAT": "text", "RIBBON_DRAIN_TIMEOUT_S": "60",
        "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


def produce(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes | None] | None = None) -> None:
    p = clients.producer(plain_config(bootstrap).tool_producer())
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=keys[i] if keys else f"k{i}".encode())
        p.poll(0)
    assert p.flush(30) == 0


def topics(new_topic, partitions: int = 3) -> dict[str, str]:
    return {"input_topic": new_topic("in", partitions), "output_topic": new_topic("out"),
            "dlq_topic": new_topic("dlq")}


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as fh:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, "-m", "worker", "run"], env=env, stdout=fh, stderr=fh, cwd=ROOT)


def mixed_docs(n: int, seed: int) -> list[dict]:
    sizes = (1, 2, 3, 1, 5, 2)
    return [document(i, n_lines=sizes[i % len(sizes)], seed=seed) for i in range(n)]


def by_id(msgs) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in msgs:
        o = orjson.loads(m.value())
        out.setdefault(o["id"], []).append(o)
    return out


def same_but_timing(a: dict, b: dict) -> bool:
    return {**a, "timing_ms": None} == {**b, "timing_ms": None}


def read_until_ids(bootstrap: str, topic: str, ids: set[str], timeout_s: float,
                   isolation: str = "read_committed") -> list:
    """Read `topic` from the start until every id in `ids` was seen (or the timeout); returns all messages."""
    c = reader(bootstrap, f"check-{uuid.uuid4().hex}", isolation)
    c.subscribe([topic])
    out, seen = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        while not ids <= seen and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out.append(m)
                    seen.add(orjson.loads(m.value())["id"])
    finally:
        c.close()
    return out


def committed_equals_end(bootstrap: str, group: str, topic: str, partitions: int) -> tuple[list, list]:
    """(committed offsets, end offsets) of the group on `topic`: equal once every input was committed.

    End offsets are read off the topic itself (last offset + 1 per partition): the embedded broker's
    watermark answer is not reliable."""
    from confluent_kafka import TopicPartition

    ends = [0] * partitions
    for m in consume_all(bootstrap, topic, expected=10**9, timeout_s=8):
        ends[m.partition()] = max(ends[m.partition()], m.offset() + 1)
    c = clients.consumer(plain_config(bootstrap).tool_consumer(group, **{"isolation.level": "read_uncommitted"}))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = [max(tp.offset, 0) for tp in c.committed(tps, timeout=10)]
    finally:
        c.close()
    return committed, ends


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `cond` until true; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process `pid` stopped (SIGSTOP) inside the block, continued (SIGCONT) however it ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# ---- workers forked from a preloaded server (many short-lived workers, e.g. kill -9 cycles) ----------

FORK_PRELOAD = ["torch", "transformers", "transformers.models.qwen2.modeling_qwen2", "confluent_kafka",
                "worker.cli.main", "worker.engine.loader", "worker.pipeline.app"]


def _run_worker(env: dict[str, str], log: str) -> None:
    """A forked child: becomes `ribbon run` with `env`, its output appended to `log`."""
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from worker.cli.main import main

    sys.exit(main(["run"]))


def worker_forker():
    """A multiprocessing context whose children fork from a server that has imported torch, transformers and
    the worker: a worker process starts in about a second instead of paying the imports each time. The child
    runs the same `ribbon run` code path as `python -m worker run`; kill -9 hits a real worker process."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORK_PRELOAD)
    return ctx


def fork_worker(ctx, env: dict[str, str], log: Path):
    proc = ctx.Process(target=_run_worker, args=(env, str(log)), daemon=False)
    proc.start()
    return proc


def regex_nodes(pattern: str):
    """Every (op, argument) of `pattern`'s parse by the stdlib's regular expression parser, depth first."""
    import re._parser as sre_parse  # noqa: PLC0415 - the stdlib's parser, to walk an expression

    def walk(tree):
        for op, av in tree:
            yield op, av
            for sub in av if isinstance(av, (tuple, list)) else (av,):
                if isinstance(sub, sre_parse.SubPattern):
                    yield from walk(sub)
                elif isinstance(sub, (tuple, list)):
                    for s in sub:
                        if isinstance(s, sre_parse.SubPattern):
                            yield from walk(s)
    return walk(sre_parse.parse(pattern))
