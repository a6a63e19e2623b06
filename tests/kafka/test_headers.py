"""Headers: input headers (traceparent included) reach the output and dead letters; outputs carry their source."""

from __future__ import annotations

import signal
import uuid

import orjson
import pytest
from helpers import consume_all, mixed_docs, start_worker, topics, worker_env
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.kafka.headers import (MAX_HEADER_MESSAGE_BYTES, carried, dead_letter_headers, output_headers,
                                  parse_dead_letter_headers, replayed)
from worker.messages.models import BadMessage, decode_input

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_output_headers_keep_input_order_and_replace_reserved_names():
    sent = [("traceparent", TRACEPARENT), ("x", b"1"), ("source.offset", b"999"), ("x", b"2"), ("nul", None),
            ("error.class", b"spoof")]
    assert carried(sent) == (("traceparent", TRACEPARENT), ("x", b"1"), ("x", b"2"), ("nul", None))
    assert output_headers(sent, "in", 3, 42)[-3:] == (("source.topic", b"in"), ("source.partition", b"3"),
                                                        ("source.offset", b"42"))
    assert output_headers(None, "in", 0, 0) == (("source.topic", b"in"), ("source.partition", b"0"),
                                                ("source.offset", b"0"))


def test_dead_letter_headers() -> None:
    with pytest.raises(BadMessage) as info:
        decode_input(b'{"text": 5}', max_bytes=4096)
    err = info.value
    headers = dead_letter_headers(err, topic="in", partition=3, offset=99, worker_version="0.1.0")
    assert [k for k, _ in headers] == ["error.class", "error.message", "source.topic", "source.partition",
                                       "source.offset", "worker.version"]
    values = dict(headers)
    assert values["error.class"] == b"schema" and b"text" in values["error.message"]
    assert (values["source.topic"], values["source.partition"], values["source.offset"]) == (b"in", b"3", b"99")
    assert values["worker.version"] == b"0.1.0"
    parsed = parse_dead_letter_headers([("other", b"x"), *headers])
    assert (parsed.error_class, parsed.source_offset) == ("schema", "99")


@settings(deadline=None)  # no per-example deadline: CI machines are shared
@given(st.text(min_size=1, max_size=3000).filter(lambda s: s.strip()))
def test_dead_letter_message_is_bounded_valid_utf8(reason: str) -> None:
    headers = dict(dead_letter_headers(BadMessage("schema", reason), topic="t", partition=0, offset=0,
                                       worker_version="v"))
    message = headers["error.message"]
    assert len(message) <= MAX_HEADER_MESSAGE_BYTES and b"\n" not in message
    assert " ".join(reason.split()).startswith(message.decode("utf-8"))


def test_a_replayed_dead_letter_leaves_every_reserved_header_behind():
    dl = [("tenant", b"t1"), *dead_letter_headers(BadMessage("schema", "x"), topic="in", partition=0, offset=5,
                                                   worker_version="v"),
          ("error.value_dropped", b"msg_size_too_large"), ("error.headers_dropped", b"3 headers, 20000 B")]
    assert replayed(dl, "dlq", 2, 9) == [("tenant", b"t1"), ("ribbon.replay.source", b"dlq:2:9")]


def test_headers_travel_through_the_worker(broker, new_topic, tiny_model, tmp_path):
    from confluent_kafka import Producer

    t = topics(new_topic, partitions=1)
    docs = mixed_docs(3, seed=31)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, d in enumerate(docs):
        p.produce(t["input_topic"], value=orjson.dumps(d), key=b"k%d" % i,
                  headers=[("traceparent", TRACEPARENT), ("tenant", b"t%d" % i), ("source.offset", b"spoof")])
    p.produce(t["input_topic"], value=b"{not json", key=b"bad", headers=[("tenant", b"bad")])
    assert p.flush(10) == 0
    proc = start_worker(worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t),
                        tmp_path / "worker.log")
    try:
        outs = consume_all(broker.bootstrap, t["output_topic"], 3, timeout_s=120, isolation="read_committed")
        dead = consume_all(broker.bootstrap, t["dlq_topic"], 1, timeout_s=30, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0, (tmp_path / "worker.log").read_text()[-3000:]
    assert len(outs) == 3 and len(dead) == 1
    for m in outs:
        o = orjson.loads(m.value())
        h = m.headers()
        i = int(m.key()[1:])
        assert h == [("traceparent", TRACEPARENT), ("tenant", b"t%d" % i), ("source.topic", t["input_topic"].encode()),
                     ("source.partition", b"0"), ("source.offset", str(o["input"]["offset"]).encode())]
    (d,) = dead
    assert d.headers()[0] == ("tenant", b"bad")
    dl = parse_dead_letter_headers(d.headers())
    assert dl.error_class == "invalid_json" and dl.source_offset == "3"
