"""One-line syslog records from many hosts, as a log shipper sends them, and the demo's windowed stream.

`syslog_stream` (the demo, bench/windows.py, bench/output_compression.py) yields RFC 3164 lines (`<PRI>Mmm dd hh:mm:ss host app[pid]: message`), mostly routine
(sshd logins, cron, systemd units, kernel link changes), with now and then a
failure, and, rarely, a Java stack trace arriving one frame per record.
Deterministic for a seed.

`ribbon demo` reads a lines topic next to its documents topic (`windowing.topics`); after the
documents, `run_lines` sends LINES records from HOSTS hosts and reports what the windows became.
Short windows keep the demo quick: a window closes 1 s after its host's last record.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import orjson
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from worker.kafka import clients
from worker.kafka.config import plain_config

ROUTINE = (
    ("sshd", 6, "Accepted publickey for deploy from 10.{a}.{b}.{c} port {port} ssh2"),
    ("sshd", 6, "pam_unix(sshd:session): session opened for user deploy by (uid=0)"),
    ("CRON", 6, "(root) CMD (/usr/lib/sysstat/sa1 1 1)"),
    ("systemd", 6, "Started Session {n} of user deploy."),
    ("systemd", 6, "logrotate.service: Succeeded."),
    ("kernel", 6, "eth0: link up, 10000 Mbps, full duplex"),
    ("ntpd", 6, "adjusting local clock by {ms}ms"),
    ("nginx", 6, "GET /api/v1/health 200 {ms}ms"),
)
FAILURES = (
    ("sshd", 3, "Failed password for root from 203.0.{b}.{c} port {port} ssh2"),
    ("kernel", 2, "nvme0: I/O {n} QID 3 timeout, aborting"),
    ("app", 3, "upstream connect error to 10.{a}.{b}.{c}:5432: connection refused"),
)
JAVA = ("java.lang.IllegalStateException: pool exhausted after {ms} ms", "\tat com.example.db.Pool.take(Pool.java:88)",
        "\tat com.example.api.Handler.handle(Handler.java:41)",
        "Caused by: java.net.SocketTimeoutException: connect timed out", "\t... 12 more")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def syslog_stream(n: int, hosts: int = 50, seed: int = 0, t0: float = 1_700_000_000.0,
                  rate: float = 1_000.0) -> Iterator[tuple[str, str]]:
    """(host, line) for `n` records from `hosts` hosts in random order, stamped as if `rate` records/s."""
    rng = random.Random(seed)
    names = [f"node-{h:03d}" for h in range(hosts)]
    pending: dict[str, list[str]] = {}  # a stack trace's remaining frames, per host
    for i in range(n):
        host = rng.choice(names)
        t = t0 + i / rate
        stamp = _stamp(t)
        if pending.get(host):
            yield host, pending[host].pop(0)
            continue
        roll = rng.random()
        vals = {"a": rng.randrange(256), "b": rng.randrange(256), "c": rng.randrange(256),
                "port": rng.randrange(1024, 65535), "n": rng.randrange(1, 99_999), "ms": rng.randrange(1, 900)}
        if roll < 0.002:
            frames = [f.format(**vals) for f in JAVA]
            pending[host] = frames[1:]
            yield host, f"<11>{stamp} {host} app[{rng.randrange(100, 9999)}]: {frames[0]}"
            continue
        app, sev, msg = rng.choice(FAILURES) if roll < 0.02 else rng.choice(ROUTINE)
        yield host, f"<{8 + sev}>{stamp} {host} {app}[{rng.randrange(100, 9999)}]: {msg.format(**vals)}"


def _stamp(t: float) -> str:
    tm = time.gmtime(t)
    return f"{MONTHS[tm.tm_mon - 1]} {tm.tm_mday:2d} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}"


LINES_TOPIC = "ribbon.lines"
LINES, HOSTS = 400, 5


def windowed_settings(settings):
    """`settings` with the lines topic added to the input and windowed (1 s gap, 5 s max open)."""
    kafka = settings.kafka.model_copy(update={"input_topics": (*settings.kafka.input_topics, LINES_TOPIC)})
    windowing = settings.windowing.model_copy(update={"enabled": True, "topics": (LINES_TOPIC,), "gap_s": 1.0,
                                                      "max_open_s": 5.0})
    return settings.model_copy(update={"kafka": kafka, "windowing": windowing})


def published_as(summary: dict) -> str:
    """Which text an output's summary is, and why, as the demo prints it."""
    if summary["source"] == "model":
        return "the model's, passed the publish gate"
    if summary["reason"] == "digest_mode":
        return "the digest, no model"
    return f"the digest: the model's text failed the gate's {summary['reason']} check"


def run_lines(bootstrap: str, output_topic: str, timeout_s: float) -> tuple[bool, str]:
    """Send the stream and wait for the windows that cover it; (every record covered, what to print)."""
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
          f"the producer's zstd compression"]
    for w in sorted(windows, key=lambda w: w["window"]["key"])[:2]:
        info = w["window"]
        report.append(f"  {info['key']}: {info['records']} records ({info['events']} events after multiline joins), "
              f"{info['start']} .. {info['end']}, closed by {info['closed_by']}\n"
              f"    summary ({published_as(w['summary'])}): {w['summary']['text']}")
        report.extend(f"    | {h}" for h in w["highlights"][:3])
    return sum(w["window"]["records"] for w in windows) == LINES, "\n".join(report)
