"""Windowed line streams through the whole worker and the embedded broker: every record covered by exactly
one committed output, across a clean run, kill -9 cycles and a rebalance.

The clean run and the kill -9 cycles run on both brokers. On Apache Kafka a read_committed reader never
sees an aborted record, so the check is strict: every record covered by exactly one output. On Tansu aborted
transactional records are visible even to read_committed consumers, so a crash can surface repeats there: a
record may be covered by several copies of one output (identical but for timing_ms), never by two different
windows.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
import uuid

import jsonschema
import orjson
import pytest
from helpers import (ROOT, committed_equals_end, consume_all, fork_worker, is_apache, on_both_brokers, produce,
                     start_worker, topics, wait_for, worker_env, worker_forker)
from group_helpers import FAST_GROUP, committed_offsets, wait_for_assignment

JAVA = ["java.lang.IllegalStateException: pool exhausted", "\tat com.example.Pool.take(Pool.java:88)",
        "\tat com.example.Server.handle(Server.java:41)", "Caused by: java.net.SocketTimeoutException: 5000 ms",
        "\t... 7 more"]


def syslog(i: int, hosts: int) -> tuple[bytes, bytes]:
    """(key, value) of the i-th one-line syslog record, host by Kafka key."""
    host = f"host-{i % hosts:02d}"
    sev = "err" if i % 97 == 0 else "info"
    line = f"<{11 if sev == 'err' else 14}>Oct 11 22:14:{i % 60:02d} {host} sshd[{1000 + i % 7}]: " \
           f"{'Failed password for root' if sev == 'err' else 'Accepted publickey for deploy'} from 10.0.{i % 5}.{i % 250}"
    return host.encode(), line.encode()


def windowed_env(broker, t, group: str, **extra) -> dict[str, str]:
    settings = {"RIBBON_MODEL__MODE": "digest", "RIBBON_WINDOWING__ENABLED": "true", "RIBBON_WINDOWING__GAP_S": "1.0",
                "RIBBON_WINDOWING__MAX_LENGTH_S": "3.0", "RIBBON_PIPELINE__PREPROCESS_PROCESSES": "0", **extra}
    return worker_env(broker.bootstrap, "/no/model/needed", group=group, **t, **settings)


def inputs_of(broker, topic: str, n: int) -> dict[tuple[int, int], str]:
    """(partition, offset) -> key of every record in the input topic."""
    return {(m.partition(), m.offset()): m.key().decode() for m in consume_all(broker.bootstrap, topic, n, 60)}


def coverage(inputs: dict[tuple[int, int], str], outs: list[dict]) -> dict[tuple[int, int], list[dict]]:
    """Which outputs cover each input record: same partition and key, offset within the window's range.
    Each output's record count must equal the records of its key in its range."""
    by_part: dict[int, list[tuple[int, str]]] = {}
    for (p, off), key in sorted(inputs.items()):
        by_part.setdefault(p, []).append((off, key))
    cov: dict[tuple[int, int], list[dict]] = {k: [] for k in inputs}
    for o in outs:
        w = o["window"]
        (rng,) = w["offsets"]
        mine = [off for off, key in by_part[rng["partition"]] if key == w["key"] and rng["first"] <= off <= rng["last"]]
        assert len(mine) == w["records"], f"window {o['id']} counts {w['records']} records, its range holds {len(mine)}"
        assert mine[0] == rng["first"] and mine[-1] == rng["last"]
        for off in mine:
            cov[(rng["partition"], off)].append(o)
    return cov


def assert_exactly_once(cov: dict, dead: set[tuple[int, int]] = frozenset(), strict: bool = False) -> None:
    """Every good record covered, by one output (`strict`: Apache Kafka) or by copies of one output (Tansu)."""
    for coord, copies in cov.items():
        if coord in dead:
            assert not copies, f"{coord} was dead-lettered and windowed"
            continue
        assert copies, f"record {coord} is covered by no output"
        assert not strict or len(copies) == 1, f"record {coord} covered by {len(copies)} outputs under read_committed"
        first = {**copies[0], "timing_ms": None}
        assert all({**c, "timing_ms": None} == first for c in copies[1:]), f"record {coord} in two different windows"


def read_outputs(broker, topic: str, inputs: dict, dead: set, timeout_s: float) -> list[dict]:
    """Committed outputs, read until they cover every good input record (or the timeout)."""
    from helpers import reader

    c = reader(broker.bootstrap, f"check-{uuid.uuid4().hex}", "read_committed")
    c.subscribe([topic])
    outs: list[dict] = []
    covered: set = set()
    need = set(inputs) - dead
    deadline = time.monotonic() + timeout_s
    try:
        while not need <= covered and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    o = orjson.loads(m.value())
                    outs.append(o)
                    (r,) = o["window"]["offsets"]
                    covered |= {(r["partition"], off) for off in range(r["first"], r["last"] + 1)
                                if inputs.get((r["partition"], off)) == o["window"]["key"]}
    finally:
        c.close()
    return outs


@pytest.mark.slow
@on_both_brokers
def test_a_windowed_syslog_stream_end_to_end(cluster, cluster_topic, tmp_path):
    broker = cluster
    t = topics(cluster_topic)
    n, hosts = 600, 6
    pairs = [syslog(i, hosts) for i in range(n)]
    keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    keys += [b"host-00"] * len(JAVA) + [b"host-01"]
    values += [line.encode() for line in JAVA] + [b"\xff\xfe not utf-8"]
    produce(broker.bootstrap, t["input_topic"], values, keys)
    inputs = inputs_of(broker, t["input_topic"], len(values))
    dead = {c for c, k in inputs.items() if k == "host-01" and c == max(x for x in inputs if inputs[x] == "host-01")}
    env = windowed_env(broker, t, f"g-{uuid.uuid4().hex[:8]}", RIBBON_WINDOWING__MAX_LINES="40")
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        outs = read_outputs(broker, t["output_topic"], inputs, dead, 120)
        dlq = consume_all(broker.bootstrap, t["dlq_topic"], 1, 30, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0, (tmp_path / "worker.log").read_text()[-3000:]
    assert_exactly_once(coverage(inputs, outs), dead, strict=is_apache(cluster))
    assert [dict(m.headers())["error.class"] for m in dlq] == [b"invalid_utf8"]
    schema = json.loads((ROOT / "schemas" / "output.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    for o in outs:
        validator.validate(o)
        w = o["window"]
        assert o["source"] == w["key"] and w["closed_by"] in ("max_lines", "gap", "max_length", "max_open", "flush")
        assert w["records"] <= 40 and w["start"] <= w["end"]
        assert o["digest"]["lines"] >= 1 and o["summary"]["text"]
    java = [o for o in outs if any(JAVA[0] in h for h in o["highlights"] + [o["summary"]["text"]])
            or o["window"]["events"] < o["window"]["records"]]
    # the trace's five records are one event: joined to the record before them (what logged it, for the
    # multiline rule) or opening a window of their own
    assert any(o["window"]["records"] - o["window"]["events"] in (len(JAVA) - 1, len(JAVA)) for o in java), \
        "the stack trace joins its first line: one event for its five records"
    assert sum(o["window"]["records"] for o in outs) == len(inputs) - len(dead)


class Stream:
    """Syslog lines produced at a steady rate on a thread, one host (host-00) as busy as all the others
    together: its windows close on max_lines while the others' stay open, so commits always meet open
    windows of other keys."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 300.0) -> None:
        from worker.kafka import clients
        from worker.kafka.config import plain_config

        self.producer = clients.producer(plain_config(bootstrap).tool_producer())
        self.topic, self.rate, self.sent = topic, rate, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        while not self.stop.is_set():
            i = self.sent
            key, value = syslog(i // 2 * 7 + i % 2, 8) if i % 2 else (b"host-00", syslog(i, 1)[1])
            self.producer.produce(self.topic, value=value, key=key)
            self.producer.poll(0)
            self.sent += 1
            time.sleep(max(0.0, start + self.sent / self.rate - time.monotonic()))

    def __enter__(self) -> Stream:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0


@pytest.mark.slow
@on_both_brokers
def test_kill_9_during_a_windowed_stream_covers_every_record_once(cluster, cluster_topic, tmp_path, monkeypatch):
    """Lines keep arriving while workers are killed at random moments after their first commit: the windows
    rebuild from the committed offsets, and no record ends up in two different windows."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    broker = cluster
    ctx = worker_forker()
    rng = random.Random(23)
    t = topics(cluster_topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = windowed_env(broker, t, group, RIBBON_WINDOWING__MAX_LINES="20", **FAST_GROUP)
    log = tmp_path / "worker.log"
    log.touch()
    history = [[0, 0, 0]]
    with Stream(broker.bootstrap, t["input_topic"]) as stream:
        for kill in range(KILLS):
            since = log.stat().st_size
            proc = fork_worker(ctx, env, log)
            assert wait_for_assignment(proc, log, since, 90), f"cycle {kill}: no assignment\n" + log.read_text()[-3000:]
            wait_for(lambda: sum(committed_offsets(broker.bootstrap, group, t["input_topic"], 3)) > sum(history[-1]),
                     60, f"cycle {kill}: a first commit")
            time.sleep(rng.uniform(0.2, 1.5))
            proc.kill()
            proc.join(30)
            assert proc.exitcode == -signal.SIGKILL
            history.append(committed_offsets(broker.bootstrap, group, t["input_topic"], 3))
            assert all(a <= b for a, b in zip(history[-2], history[-1])), f"offsets moved backwards: {history}"
    proc = fork_worker(ctx, env, log)
    inputs = inputs_of(broker, t["input_topic"], stream.sent)
    try:
        outs = read_outputs(broker, t["output_topic"], inputs, set(), 180)
    finally:
        proc.terminate()  # SIGTERM: the drain closes what is open, commits, exits 0
        proc.join(90)
    assert proc.exitcode == 0, log.read_text()[-3000:]
    assert_exactly_once(coverage(inputs, outs), strict=is_apache(cluster))
    committed, ends = committed_equals_end(broker.bootstrap, group, t["input_topic"], 3)
    assert committed == ends, "every input offset is committed once its window's output is out"


KILLS = 4


@pytest.mark.slow
def test_a_rebalance_mid_stream_covers_every_record_once(broker, new_topic, tmp_path):
    """A second worker joins while windows are open, then the first leaves: revoked partitions' open windows
    are dropped uncommitted and rebuilt by their new owner."""
    t = topics(new_topic, partitions=4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = windowed_env(broker, t, group, RIBBON_WINDOWING__MAX_LINES="20", **FAST_GROUP)
    a = start_worker(env, tmp_path / "a.log")
    b = None
    try:
        with Stream(broker.bootstrap, t["input_topic"]) as stream:
            wait_for(lambda: b"assigned [(" in (tmp_path / "a.log").read_bytes(), 90, "the first assignment")
            b = start_worker({**env, "RIBBON_KAFKA__WORKER_SLOT": "1"}, tmp_path / "b.log")
            wait_for(lambda: b"assigned [(" in (tmp_path / "b.log").read_bytes(), 90, "the second's assignment")
            time.sleep(1.0)  # both own partitions with open windows
            a.send_signal(signal.SIGTERM)
            assert a.wait(90) == 0, (tmp_path / "a.log").read_text()[-3000:]
        inputs = inputs_of(broker, t["input_topic"], stream.sent)
        outs = read_outputs(broker, t["output_topic"], inputs, set(), 120)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(90)
    assert b.returncode == 0, (tmp_path / "b.log").read_text()[-3000:]
    assert b"revoked" in (tmp_path / "a.log").read_bytes()
    assert_exactly_once(coverage(inputs, outs))
