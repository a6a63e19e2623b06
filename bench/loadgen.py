"""The benchmarks' producer and reader, in a process of their own.

A user's producers and readers run elsewhere, not inside the worker's process. Run as threads of
the benchmark (which is also the worker's process), they took the worker's interpreter lock for
every produce call and every output they parsed, and a reader waiting for that lock noted a summary
later than it became visible. Here they run in a spawned process with their own interpreter; times
are time.monotonic() (CLOCK_MONOTONIC: one clock for every process of the host, the worker's too).

    read_outputs(bootstrap, topic, partitions, n, timeout_s)          backlog: until n summaries are read
    OutputReader(..., windows=True)                                   backlog of windows: until they hold n records
    produce_and_read(bootstrap, in_topic, out_topic, partitions, docs, rate, timeout_s)   steady load
Each returns when its process is done; the process's result comes back through a pipe.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import threading
import time
from dataclasses import dataclass

import orjson
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from worker.kafka import clients
from worker.kafka.clients import take
from worker.kafka.config import plain_config


def _reader_consumer(bootstrap: str, topic: str, partitions: int):
    c = clients.consumer(plain_config(bootstrap).tool_consumer(
        "bench-reader", **{"isolation.level": "read_committed", "fetch.wait.max.ms": 10}))
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return c


def _read(bootstrap: str, topic: str, partitions: int, n: int, deadline: float, seen: dict, ready=None,
          windows: bool = False, prefix: str = "") -> None:
    """Summaries by id: (time read, timing_ms, tokens), until n are read or the deadline passes.
    windows: outputs of windows, until their windows hold n records; each value adds the window's records.
    prefix: only ids that start with it count (the topic may hold an earlier load's summaries)."""
    c = _reader_consumer(bootstrap, topic, partitions)
    if ready is not None:
        ready.set()
    got = 0  # summaries read, or the records of the windows read
    try:
        while got < n and time.monotonic() < deadline:
            for m in take(c, 1000, 0.05):
                if m.error() is None:
                    o = orjson.loads(m.value())
                    if o["id"] not in seen and o["id"].startswith(prefix):
                        records = (o["window"]["records"],) if windows else ()
                        seen[o["id"]] = (time.monotonic(), o["timing_ms"], o["tokens"], *records)
                        got += records[0] if windows else 1
                        if got >= n:
                            break
    finally:
        c.close()


def _produce_at(bootstrap: str, topic: str, docs: list[dict], rate: float, sent: dict) -> None:
    """Constant rate: document i goes at t0 + i / rate (the produce call's time is its start)."""
    p = clients.producer(plain_config(bootstrap).tool_producer(**{"linger.ms": 0}))
    t0 = time.monotonic()
    for i, d in enumerate(docs):
        wait = t0 + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        sent[d["id"]] = time.monotonic()
        p.produce(topic, value=orjson.dumps(d), key=d["id"].encode())
        p.poll(0)
    p.flush(30)


def _start_reader(conn, bootstrap, topic, partitions, n, deadline, windows=False,
                  prefix: str = "") -> tuple[threading.Thread, dict]:
    """The reader thread, once its consumer is assigned; then "ready" to the parent."""
    seen: dict = {}
    ready = threading.Event()
    t = threading.Thread(target=_read, args=(bootstrap, topic, partitions, n, deadline, seen, ready, windows, prefix))
    t.start()
    ready.wait(30)
    conn.send(("ready",))
    return t, seen


def _quiet_gc() -> None:
    """No collector pauses in the load process: one would stall the producer and the reader alike
    (the reader then notes summaries late), and its walks grow with what the process holds (every
    document, every summary read). It lives for one run; reference counting frees the rest."""
    gc.freeze()
    gc.disable()


def _read_main(conn, bootstrap, topic, partitions, n, timeout_s, windows=False, prefix="") -> None:
    _quiet_gc()
    reader, seen = _start_reader(conn, bootstrap, topic, partitions, n, time.monotonic() + timeout_s, windows, prefix)
    reader.join()
    conn.send(("done", seen))


def _load_main(conn, bootstrap, in_topic, out_topic, partitions, docs, rate, timeout_s, prefix="") -> None:
    _quiet_gc()
    deadline = time.monotonic() + len(docs) / rate + timeout_s
    reader, seen = _start_reader(conn, bootstrap, out_topic, partitions, len(docs), deadline, prefix=prefix)
    if conn.recv() != ("go",):
        return
    conn.send(("started", time.monotonic()))
    sent: dict = {}
    _produce_at(bootstrap, in_topic, docs, rate, sent)
    reader.join()
    conn.send(("done", sent, seen))


class _Child:
    def __init__(self, target, *args) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(child, *args), name="ribbon-bench-load", daemon=True)
        self.proc.start()
        child.close()
        self.expect("ready", 60)

    def expect(self, what: str, timeout_s: float) -> tuple:
        if not self.conn.poll(timeout_s):
            self.proc.kill()
            raise RuntimeError(f"the benchmark's load process did not report {what!r} in {timeout_s:.0f} s")
        msg = self.conn.recv()
        if msg[0] != what:
            raise RuntimeError(f"the benchmark's load process said {msg[0]!r}, expected {what!r}")
        return msg

    def close(self) -> None:
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


@dataclass(frozen=True)
class OutputTopic:
    """The topic an OutputReader reads: its broker, its name and its partitions."""

    bootstrap: str
    topic: str
    partitions: int


class OutputReader(_Child):
    """Reads the output topic in its own process from the start (assign, read_committed) until n
    summaries are read or `timeout_s` passes; `result()` waits for that and returns {id: (t, timing_ms, tokens)}.
    windows=True: outputs of windows, read until their windows hold n records; {id: (t, timing_ms, tokens, records)}."""

    def __init__(self, out: OutputTopic, n: int, timeout_s: float, windows: bool = False, prefix: str = "") -> None:
        self.timeout_s = timeout_s
        super().__init__(_read_main, out.bootstrap, out.topic, out.partitions, n, timeout_s, windows, prefix)

    def result(self) -> dict:
        try:
            return self.expect("done", self.timeout_s + 30)[1]
        finally:
            self.close()


@dataclass(frozen=True)
class Topics:
    """Where a load goes: the broker, the input topic (of `partitions`) and the output topic read back."""

    bootstrap: str
    input: str
    output: str
    partitions: int


class SteadyLoad(_Child):
    """Produces `docs` at `rate` and reads the output topic, in its own process. `start()` begins the
    producing and returns its start time; `result()` returns (sent {id: t}, seen {id: (t, timing_ms, tokens)})."""

    def __init__(self, topics: Topics, docs: list[dict], rate: float, timeout_s: float, prefix: str = "") -> None:
        """prefix: the common start of the docs' ids, when the output topic holds an earlier load's summaries."""
        self.wait_s = len(docs) / rate + timeout_s + 30
        t = topics
        super().__init__(_load_main, t.bootstrap, t.input, t.output, t.partitions, docs, rate, timeout_s, prefix)

    def start(self) -> float:
        self.conn.send(("go",))
        return self.expect("started", 30)[1]

    def result(self) -> tuple[dict, dict]:
        try:
            _, sent, seen = self.expect("done", self.wait_s)
            return sent, seen
        finally:
            self.close()
