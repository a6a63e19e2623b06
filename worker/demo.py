"""`ribbon demo`: the whole pipeline on one machine, nothing to configure.

Starts the embedded broker, produces synthetic telemetry (and a few bad
messages, to show the dead-letter topic), runs the worker on the configured
model (default: a tiny random model built offline, so the summaries are
noise: point --model at a real checkpoint for real ones), reads every
summary back and prints what came out.
"""

from __future__ import annotations

import time

import orjson

from worker.samples import corpus

BAD = (b"\xff\xfe not utf-8", b'{"text": ', b'{"lines": []}', b"   ")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from worker.kafka import clients
    from worker.kafka.config import plain_config

    p = clients.producer(plain_config(bootstrap).tool_producer())
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=f"k{i}".encode())
        p.poll(0)
    if p.flush(30):
        raise RuntimeError("demo input was not acknowledged by the broker")


def read(bootstrap: str, topics: list[str], expected: int, timeout_s: float, progress: bool) -> list:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from tqdm import tqdm

    from worker.kafka import clients
    from worker.kafka.config import plain_config

    # assign(), not a group: a group join on the embedded broker blocks ~half of session.timeout.ms.
    c = clients.consumer(plain_config(bootstrap).tool_consumer(f"demo-reader-{time.time_ns()}",
                                                               **{"isolation.level": "read_committed"}))
    c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])  # one partition each (run_demo)
    out: list = []
    deadline = time.monotonic() + timeout_s
    with tqdm(total=expected, desc="summaries", unit="doc", disable=not progress) as bar:
        while len(out) < expected and time.monotonic() < deadline:
            got = [m for m in c.consume(500, 0.2) if m.error() is None]
            out.extend(got)
            bar.update(len(got))
    c.close()
    return out


def run_demo(settings, documents: int, timeout_s: float, progress: bool = True) -> int:
    from worker.kafka.broker import EmbeddedBroker
    from worker.kafka.config import embedded_settings
    from worker.service.app import Worker

    k = settings.kafka
    with EmbeddedBroker() as broker:
        broker.create_topics({k.input_topics[0]: 4, k.output_topic: 1, k.dlq_topic: 1})
        s = embedded_settings(settings, broker.bootstrap)
        print(f"embedded broker on {broker.bootstrap}; loading model {s.model.path!r} ...", flush=True)
        worker = Worker(s, broker.bootstrap)
        docs = [orjson.dumps(d) for d in corpus(documents)]
        t0 = time.monotonic()
        worker.start()
        produce(broker.bootstrap, k.input_topics[0], docs + list(BAD))
        got = read(broker.bootstrap, [k.output_topic, k.dlq_topic], len(docs) + len(BAD), timeout_s, progress)
        wall = time.monotonic() - t0
        worker.drain(30)
        worker.close()
    outs = [orjson.loads(m.value()) for m in got if m.topic() == k.output_topic]
    dlq = [m for m in got if m.topic() == k.dlq_topic]
    for o in outs[:3]:
        print(f"\n{o['id']} ({o['source']}, {o['tokens']['input']} tokens in, {o['tokens']['output']} out)")
        print(f"  summary:    {o['summary'][:160]!r}")
        print(f"  highlights: {o['highlights']}")
    for m in dlq:
        h = dict(m.headers() or [])
        print(f"dead letter: {h.get('error.class', b'?').decode()}: {h.get('error.message', b'').decode()[:90]}")
    tokens = sum(o["tokens"]["input"] for o in outs)
    print(f"\n{len(outs)}/{len(docs)} summaries and {len(dlq)}/{len(BAD)} dead letters in {wall:.1f} s "
          f"({len(outs) / wall:.1f} docs/s, {tokens / wall:.0f} input tokens/s, backend {worker.engine.backend})")
    return 0 if len(outs) == len(docs) and len(dlq) == len(BAD) else 1
