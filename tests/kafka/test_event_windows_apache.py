"""Event-time windows on Apache Kafka (the broker of record for exactly-once): a backlog of shipper records
split by the records' own times, late records kept, and every record in exactly one committed output across
a kill -9 and a restart."""

from __future__ import annotations

import signal
import time
import uuid

import orjson
import pytest
from helpers import produce, start_worker, topics, wait_for
from group_helpers import committed_offsets
from integration.test_windowing_worker import assert_exactly_once, coverage, inputs_of, read_outputs, windowed_env

from conftest import topic_maker

pytestmark = [pytest.mark.kafka_apache, pytest.mark.slow]

T0 = 1_714_564_800  # s
HOSTS, SESSIONS, PER_SESSION = 6, 3, 20


def records() -> tuple[list[bytes], list[bytes]]:
    """Vector-shaped records, hosts interleaved: three sessions of 20 records a second apart, 60 s of silence
    between sessions, and after each host's second session one record 40 s older than its newest (late)."""
    keys, values = [], []
    for s in range(SESSIONS):
        for i in range(PER_SESSION):
            for h in range(HOSTS):
                t = T0 + s * 80 + i
                keys.append(f"host-{h}".encode())
                values.append(orjson.dumps({"message": f"app[{h}]: step {s}.{i} ok", "host": f"host-{h}",
                                            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))}))
        if s == 1:
            for h in range(HOSTS):
                keys.append(f"host-{h}".encode())
                values.append(orjson.dumps({"message": f"app[{h}]: a late record", "host": f"host-{h}",
                                            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                       time.gmtime(T0 + 80 + PER_SESSION - 41))}))
    return keys, values


def test_event_time_windows_are_exactly_once_across_a_kill(kafka, tmp_path):
    t = topics(topic_maker(kafka))
    keys, values = records()
    produce(kafka.bootstrap, t["input_topic"], values, keys)
    inputs = inputs_of(kafka, t["input_topic"], len(values))
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = windowed_env(kafka, t, group, RIBBON_WINDOWING__TIME="event", RIBBON_WINDOWING__GAP_S="10",
                       RIBBON_WINDOWING__GRACE_S="5", RIBBON_WINDOWING__MAX_LENGTH_S="20",
                       RIBBON_WINDOWING__MAX_LINES="1000")
    first = start_worker(env, tmp_path / "a.log")
    try:
        wait_for(lambda: sum(committed_offsets(kafka.bootstrap, group, t["input_topic"], 3)) > 0, 120,
                 "a first commit\n" + (tmp_path / "a.log").read_text()[-2000:])
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    second = start_worker(env, tmp_path / "b.log")
    try:
        outs = read_outputs(kafka, t["output_topic"], inputs, set(), 180)
    finally:
        second.send_signal(signal.SIGTERM)
        rc = second.wait(90)
    assert rc == 0, (tmp_path / "b.log").read_text()[-3000:]
    cov = coverage(inputs, outs)
    assert_exactly_once(cov)
    assert all(len(copies) == 1 for copies in cov.values()), "read_committed on Apache Kafka: one copy each"
    per_host: dict[str, int] = {}
    for o in outs:
        w = o["window"]
        assert w["clock"] == "event" and w["read_start"] <= w["read_end"]
        per_host[w["key"]] = per_host.get(w["key"], 0) + 1
    assert min(per_host.values()) >= SESSIONS, f"each host's sessions in windows of their own: {per_host}"
    assert sum(o["window"]["late"] for o in outs) >= 1
