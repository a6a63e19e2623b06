"""A poison message through a real worker and broker: dead-lettered, the good ones after it published,
and a restarted worker starts clean (no crash loop on the same message)."""

from __future__ import annotations

import signal
import uuid

import orjson
import pytest
from confluent_kafka import TopicPartition
from helpers import by_id, consume_all, mixed_docs, produce, read_until_ids, reader, start_worker, topics, worker_env

from worker.kafka.headers import parse_dead_letter_headers

POISON = b'{"text": "x", "unknown": ' + b"[" * 1000 + b"1" + b"]" * 1000 + b', "attributes": {"n": 1e300}}'


def _stop(proc, log) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(90) == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_a_poison_message_is_dead_lettered_the_good_ones_published_and_a_restart_runs_on(
        broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic, partitions=1)
    first, second = mixed_docs(6, seed=28)[:3], mixed_docs(6, seed=28)[3:]
    produce(broker.bootstrap, t["input_topic"], [POISON, *(orjson.dumps(d) for d in first)])
    env = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t)
    log1, log2 = tmp_path / "worker1.log", tmp_path / "worker2.log"
    proc = start_worker(env, log1)
    try:
        got = read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in first}, timeout_s=120)
        assert proc.poll() is None, log1.read_text()[-3000:]
    finally:
        _stop(proc, log1)
    assert set(by_id(got)) == {d["id"] for d in first}
    (dead,) = consume_all(broker.bootstrap, t["dlq_topic"], 1, timeout_s=30)
    h = parse_dead_letter_headers(dead.headers())
    assert (h.error_class, h.source_offset) == ("schema", "0") and h.error_message.startswith("unknown.0.0")
    assert dead.value() == POISON
    dlq_end = _end(broker.bootstrap, t["dlq_topic"])
    # The restart: the poison message was committed with its dead letter, so the new worker begins after it.
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in second])
    proc = start_worker(env, log2)
    try:
        got = read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in second}, timeout_s=120)
        assert proc.poll() is None, log2.read_text()[-3000:]
    finally:
        _stop(proc, log2)
    assert {d["id"] for d in second} <= set(by_id(got))
    assert _end(broker.bootstrap, t["dlq_topic"]) == dlq_end  # nothing dead-lettered again


def _end(bootstrap: str, topic: str) -> int:
    c = reader(bootstrap, f"end-{uuid.uuid4().hex}")
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()
