"""The worker end to end through a real broker, tiny random model on CPU.

The end-to-end and the bad-input tests run on Tansu and on Apache Kafka (fewer
documents there, for CI time); the others on Tansu."""

from __future__ import annotations

import json
import signal
import time
import uuid
import subprocess
import sys

import jsonschema
import orjson
from helpers import ROOT, by_id, consume_all, mixed_docs, on_both_brokers, produce, start_worker, topics, wait_for, worker_env

from worker.demo.samples import document



@on_both_brokers
def test_two_thousand_documents_one_summary_each(cluster, cluster_topic, tiny_model, tmp_path):
    t = topics(cluster_topic)
    n = 300 if type(cluster).__name__ == "ApacheKafka" else 2000
    docs = mixed_docs(n, seed=1)
    produce(cluster.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    env = worker_env(cluster.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t)
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        got = consume_all(cluster.bootstrap, t["output_topic"], n, timeout_s=300, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0, (tmp_path / "worker.log").read_text()[-3000:]
    if type(cluster).__name__ == "ApacheKafka":  # and no repeat arrives later (read_committed hides aborted ones)
        got = consume_all(cluster.bootstrap, t["output_topic"], n + 1, timeout_s=5, isolation="read_committed")
    outs = by_id(got)
    assert set(outs) == {d["id"] for d in docs}
    assert all(len(v) == 1 for v in outs.values())
    schema = json.loads((ROOT / "schemas" / "output.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)  # checks the schema once, not per output
    validator.check_schema(schema)
    src = {d["id"]: d for d in docs}
    for m in got:
        o = orjson.loads(m.value())
        validator.validate(o)
        d = src[o["id"]]
        assert (o["source"], o["kind"], o["attributes"]) == (d["source"], d["kind"], d["attributes"])
        assert o["input"]["topic"] == t["input_topic"]
        assert o["tokens"]["input"] > 0 and 0 <= o["tokens"]["output"] <= 4  # a random model may stop at once (EOS)
        assert o["highlights"] and all(h in [ln.strip() for ln in d["lines"]] for h in o["highlights"])
        assert m.key() == f"k{docs.index(d)}".encode()  # the output key is the input key
    assert consume_all(cluster.bootstrap, t["dlq_topic"], 1, timeout_s=2) == []


BAD_CASES = [
    (b"\xff\xfe\xfa", "invalid_utf8"),
    (b'{"text": "unterminated', "invalid_json"),
    (b'{"lines": []}', "schema"),
    (b'{"text": "   "}', "empty_text"),
    (b'{"text": 42}', "schema"),
    (b"[1, 2, 3]", "not_an_object"),
    (None, "null_value"),
    (b'{"text": "' + b"x" * 70_000 + b'"}', "oversize"),
]


@on_both_brokers
def test_bad_messages_go_to_the_dead_letter_topic_with_reasons(cluster, cluster_topic, tiny_model, tmp_path):
    t = topics(cluster_topic)
    n = 400 if type(cluster).__name__ == "ApacheKafka" else 2000
    values, expect_bad = [], {}
    for i in range(n):
        if i % 2:
            v, reason = BAD_CASES[i % len(BAD_CASES)]
            values.append(v)
            expect_bad[i] = reason
        else:
            values.append(orjson.dumps(document(i, n_lines=3, seed=2)))
    keys = [f"key-{i}".encode() for i in range(n)]
    produce(cluster.bootstrap, t["input_topic"], values, keys)
    env = worker_env(cluster.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}",
                     RIBBON_KAFKA__MAX_MESSAGE_BYTES="65536", **t)
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        dlq = consume_all(cluster.bootstrap, t["dlq_topic"], n // 2, timeout_s=240, isolation="read_committed")
        good = consume_all(cluster.bootstrap, t["output_topic"], n // 2, timeout_s=240, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0
    if type(cluster).__name__ == "ApacheKafka":  # nothing more arrives: one summary or one dead letter per input
        dlq = consume_all(cluster.bootstrap, t["dlq_topic"], n // 2 + 1, timeout_s=5, isolation="read_committed")
        good = consume_all(cluster.bootstrap, t["output_topic"], n // 2 + 1, timeout_s=5, isolation="read_committed")
    assert len(good) == n // 2 and len(by_id(good)) == n // 2
    assert len(dlq) == n // 2
    for m in dlq:
        i = int(m.key().decode().split("-")[1])
        h = {k: v.decode() for k, v in m.headers()}
        assert m.value() == values[i]
        assert h["error.class"] == expect_bad[i], h
        assert h["error.message"]
        assert h["source.topic"] == t["input_topic"] and int(h["source.offset"]) >= 0
        assert h["worker.version"]


def test_sigterm_drains_and_commits_what_it_produced(broker, new_topic, tiny_model, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    t = topics(new_topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in mixed_docs(1500, seed=3)])
    proc = start_worker(worker_env(broker.bootstrap, tiny_model, group=group, RIBBON_DRAIN_TIMEOUT_S="30", **t),
                        tmp_path / "worker.log")
    consume_all(broker.bootstrap, t["output_topic"], 100, timeout_s=120)  # mid-stream
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(60)
    assert rc == 0, (tmp_path / "worker.log").read_text()[-3000:]
    assert time.monotonic() - t0 < 30 + 15
    outs = consume_all(broker.bootstrap, t["output_topic"], 1500, timeout_s=20, isolation="read_committed")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(t["input_topic"], p) for p in range(3)], timeout=10)
    c.close()
    for tp in committed:
        produced = {o["input"]["offset"] for o in (orjson.loads(m.value()) for m in outs)
                    if o["input"]["partition"] == tp.partition}
        n = max(tp.offset, 0)
        assert produced == set(range(n)), f"partition {tp.partition}: committed {tp.offset}"
    assert len(outs) >= 100


def test_long_documents_are_chunked_then_combined(broker, new_topic, tiny_model, tmp_path):
    """Documents far over the chunk size: summarized in chunks, chunk summaries summarized again."""
    t = topics(new_topic, partitions=2)
    docs = [document(i, n_lines=30 + i % 20, seed=6) for i in range(40)]
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    env = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}",
                     RIBBON_GENERATION__MAX_INPUT_TOKENS="300", RIBBON_DIGEST__COMPACTION="false", **t)  # raw: chunked
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        got = consume_all(broker.bootstrap, t["output_topic"], 40, timeout_s=240, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0
    outs = by_id(got)
    assert set(outs) == {d["id"] for d in docs} and all(len(v) == 1 for v in outs.values())
    for (o,) in outs.values():
        assert o["tokens"]["chunks"] > 1 and o["tokens"]["input"] > 300
        assert o["truncated"] is False


def test_a_setting_that_cannot_chunk_stops_startup(broker, tiny_model, tmp_path):
    env = worker_env(broker.bootstrap, tiny_model, group="g-bad", input_topic="a", output_topic="b",
                     dlq_topic="c", RIBBON_GENERATION__MAX_INPUT_TOKENS="16")
    res = subprocess.run([sys.executable, "-m", "worker", "run"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 2
    assert "RIBBON_GENERATION__MAX_INPUT_TOKENS" in res.stderr


def test_broker_unreachable_at_start_then_back(tiny_model, tmp_path):
    """No broker at start: the worker waits (retrying, logging) instead of dying, then works."""
    from worker.kafka.broker import EmbeddedBroker, free_port

    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    names = {"input_topic": "late-in", "output_topic": "late-out", "dlq_topic": "late-dlq"}
    log = tmp_path / "worker.log"
    proc = start_worker(worker_env(bootstrap, tiny_model, group="g-late", **names), log)
    try:  # the model loaded, the producer retrying against a closed port
        wait_for(lambda: "init_transactions not done" in log.read_text() or proc.poll() is not None, 120,
                 "the worker to retry its producer")
        assert proc.poll() is None, log.read_text()[-2000:]
        with EmbeddedBroker(port=port) as broker:
            broker.create_topics({"late-in": 2, "late-out": 1, "late-dlq": 1})
            docs = mixed_docs(50, seed=8)
            produce(broker.bootstrap, "late-in", [orjson.dumps(d) for d in docs])
            got = consume_all(broker.bootstrap, "late-out", 50, timeout_s=120, isolation="read_committed")
            assert set(by_id(got)) == {d["id"] for d in docs}
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
