"""No record stops a partition, on Apache Kafka (its default max.message.bytes, about 1 MB; Tansu accepts
any size and decompresses nothing, so these run here only).

One worker (digest mode: no model, the records matter, not the summaries) reads a partition holding,
between good documents: a 17-byte value under a header near the topic's limit, a 17-byte value under a
key near it (each input is accepted, its summary carrying that header or key is refused), and a zstd
record of 11 KB that expands to 120 MB (the consumer cannot decompress it: `_BAD_COMPRESSION` at its
offset, for ever). Each becomes a dead letter without value or key, with error.class, error.message and
worker.version and its coordinates; every good document is summarized once, and the worker stops
cleanly (nothing held the partition).
"""

from __future__ import annotations

import os
import signal
import uuid

import orjson
import pytest
from confluent_kafka import Producer
from helpers import by_id, consume_all, mixed_docs, start_worker, worker_env

from worker import __version__
from worker.kafka.headers import parse_dead_letter_headers

pytestmark = pytest.mark.kafka_apache

NEAR_LIMIT = 1_048_400  # bytes: under the broker's default message.max.bytes (1,048,588) with a 17-byte value


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, list | None]], **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 200_000_000, "linger.ms": 0, **conf})
    for key, value, headers in records:
        p.produce(topic, value=value, key=key, headers=headers)
        assert p.flush(60) == 0  # one batch per record: the order is the offsets' order


def test_refused_headers_keys_and_a_decompression_bomb_become_dead_letters_that_fit(kafka, tmp_path):
    names = {"input_topic": f"in-{uuid.uuid4().hex[:8]}", "output_topic": f"out-{uuid.uuid4().hex[:8]}",
             "dlq_topic": f"dlq-{uuid.uuid4().hex[:8]}"}
    kafka.create_topics(list(names.values()))
    docs = mixed_docs(4, seed=36)
    good = [(b"k%d" % i, orjson.dumps(d), None) for i, d in enumerate(docs)]
    noise = os.urandom(NEAR_LIMIT)  # incompressible: the broker sees it whole
    small = b'{"text": "x up"}'  # 17 bytes with the newline below
    records = [good[0], (b"h", small + b"\n", [("blob", noise)]), good[1], (noise, small + b"\n", None), good[2]]
    _produce(kafka.bootstrap, names["input_topic"], records, **{"compression.type": "none"})
    _produce(kafka.bootstrap, names["input_topic"], [(b"bomb", bytes(120_000_000), None)],
             **{"compression.type": "zstd"})
    _produce(kafka.bootstrap, names["input_topic"], [good[3]], **{"compression.type": "none"})
    log = tmp_path / "worker.log"
    env = worker_env(kafka.bootstrap, "/no/model/needed", group=f"g-{uuid.uuid4().hex[:8]}", **names,
                     RIBBON_MODEL__MODE="digest")
    proc = start_worker(env, log)
    try:
        got = consume_all(kafka.bootstrap, names["output_topic"], len(docs), timeout_s=180,
                          isolation="read_committed")
        dead = consume_all(kafka.bootstrap, names["dlq_topic"], 3, timeout_s=60, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(90)
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert set(by_id(got)) == {d["id"] for d in docs} and len(got) == len(docs)
    by_offset = {parse_dead_letter_headers(m.headers()).source_offset: m for m in dead}
    assert sorted(by_offset) == ["1", "3", "5"], text[-3000:]
    for off, cls in (("1", "output_refused"), ("3", "output_refused"), ("5", "bad_compression")):
        m = by_offset[off]
        dl = parse_dead_letter_headers(m.headers())
        assert (m.value(), m.key(), dl.error_class, dl.worker_version) == (None, None, cls, __version__)
        assert dl.error_message and dl.source_topic == names["input_topic"]
        assert all(len(v or b"") < 2048 for _, v in m.headers())  # the near-limit header is not carried
    assert dict(by_offset["1"].headers())["error.headers_dropped"] == f"1 headers, {NEAR_LIMIT + 4} B".encode()
    assert "skipped as a dead letter after 5 consume errors (_BAD_COMPRESSION)" in text
