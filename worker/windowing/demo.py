"""The demo's windowed syslog stream: one-line records from a few hosts become one summary per host window.

`ribbon demo` reads a lines topic next to its documents topic (`windowing.topics`); after the
documents, it sends LINES records from HOSTS hosts (worker/windowing/sample.py) and prints what
the windows became. Short windows keep the demo quick: a window closes 1 s after its host's last
record.
"""

from __future__ import annotations

import time

import orjson

LINES_TOPIC = "ribbon.lines"
LINES, HOSTS = 400, 5


def windowed_settings(settings):
    """`settings` with the lines topic added to the input and windowed (1 s gap, 5 s max open)."""
    kafka = settings.kafka.model_copy(update={"input_topics": (*settings.kafka.input_topics, LINES_TOPIC)})
    windowing = settings.windowing.model_copy(update={"enabled": True, "topics": (LINES_TOPIC,), "gap_s": 1.0,
                                                      "max_open_s": 5.0})
    return settings.model_copy(update={"kafka": kafka, "windowing": windowing})


def run_lines(bootstrap: str, output_topic: str, timeout_s: float) -> tuple[bool, str]:
    """Send the stream and wait for the windows that cover it; (every record covered, what to print)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from worker.kafka import clients
    from worker.kafka.config import plain_config
    from worker.windowing.sample import syslog_stream

    conf = plain_config(bootstrap)
    p = clients.producer(conf.tool_producer())
    sent = 0
    for host, line in syslog_stream(LINES, HOSTS, seed=1):
        p.produce(LINES_TOPIC, value=line.encode(), key=host.encode())
        sent += len(line)
    p.flush(30)
    c = clients.consumer(conf.tool_consumer(f"demo-lines-{time.time_ns()}", **{"isolation.level": "read_committed"}))
    c.assign([TopicPartition(output_topic, 0, OFFSET_BEGINNING)])
    windows: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while sum(w["window"]["records"] for w in windows) < LINES and time.monotonic() < deadline:
        for m in c.consume(500, 0.2):
            if m.error() is None and (o := orjson.loads(m.value())).get("window"):
                windows.append(o)
    c.close()
    out = sum(len(orjson.dumps(w)) for w in windows)
    report = [f"\nwindowed syslog: {LINES} one-line records from {HOSTS} hosts -> {len(windows)} outputs "
          f"(one per host window); {sent / 1e3:.1f} KB of lines -> {out / 1e3:.1f} KB of outputs before "
          f"compression (kafka.compression_type)"]
    for w in sorted(windows, key=lambda w: w["window"]["key"])[:2]:
        info = w["window"]
        report.append(f"  {info['key']}: {info['records']} records ({info['events']} events after multiline joins), "
              f"{info['start']} .. {info['end']}, closed by {info['closed_by']}\n    {w['summary'][:300]}")
    return sum(w["window"]["records"] for w in windows) == LINES, "\n".join(report)
