"""Headers: input headers (traceparent included) reach the output and dead letters; outputs carry their source."""

from __future__ import annotations

import signal
import uuid

import orjson
from helpers import consume_all, mixed_docs, start_worker, topics, worker_env

from worker.messages.models import parse_dead_letter_headers
from worker.kafka.headers import carried, output_headers

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_output_headers_keep_input_order_and_replace_reserved_names():
    given = [("traceparent", TRACEPARENT), ("x", b"1"), ("source.offset", b"999"), ("x", b"2"), ("nul", None),
             ("error.class", b"spoof")]
    assert carried(given) == (("traceparent", TRACEPARENT), ("x", b"1"), ("x", b"2"), ("nul", None))
    assert output_headers(given, "in", 3, 42)[-3:] == (("source.topic", b"in"), ("source.partition", b"3"),
                                                        ("source.offset", b"42"))
    assert output_headers(None, "in", 0, 0) == (("source.topic", b"in"), ("source.partition", b"0"),
                                                ("source.offset", b"0"))


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
