"""One-line syslog records from many hosts, as a log shipper sends them (the demo and the benchmarks).

RFC 3164 lines (`<PRI>Mmm dd hh:mm:ss host app[pid]: message`), mostly routine
(sshd logins, cron, systemd units, kernel link changes), with now and then a
failure, and, rarely, a Java stack trace arriving one frame per record.
Deterministic for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

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
    import time

    tm = time.gmtime(t)
    return f"{MONTHS[tm.tm_mon - 1]} {tm.tm_mday:2d} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}"
