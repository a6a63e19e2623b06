"""The embedded broker alone under a steady load: does produce-to-poll latency drift as its log grows?

No worker and no model: a producer process sends documents at a constant rate for a fixed time onto
the embedded broker (Tansu, memory storage); a read_committed consumer polls them, and (with
--transactions, the default) writes a copy of each to an output topic in transactions of about
150 ms with its offsets, as the worker does with a bin. The figure is each record's age when polled
(its CreateTime to the poll), p50/p99 per 10 s of produce time, for each partition count given: the
partition count sets how long each partition's log grows in the run.

Why: `python -m bench.steady` on the H200 showed latency rising window by window over 60 s
(bench/results/steady_h200.json). This run shows how much of that the test broker gives by itself.

    .venv/bin/python -m bench.broker_drift --rate 600 --seconds 60 --partitions 8,32
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import platform
import sys
import time
import uuid

import numpy as np
from confluent_kafka import TopicPartition

from bench.results_io import RESULTS, save
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import plain_config

BODY = 2_000  # bytes per record: about a corpus document's JSON


def _produce(bootstrap: str, topic: str, rate: float, seconds: float) -> None:
    """The load: `rate` records/s for `seconds`, paced on the clock (its own process, as a user's producer)."""
    gc.disable()
    p = clients.producer(plain_config(bootstrap).tool_producer())
    body, total, t0, i = b"x" * BODY, int(rate * seconds), time.monotonic(), 0
    while i < total:
        due = min(total, int((time.monotonic() - t0) * rate))
        while i < due:
            p.produce(topic, value=body, key=str(i).encode())
            i += 1
        p.poll(0)
        time.sleep(0.001)
    p.flush(60)


def run(rate: float, seconds: float, partitions: int, transactions: bool, window_s: float = 10.0) -> dict:
    with EmbeddedBroker() as broker:
        broker.create_topics({"in": partitions, "out": partitions})
        conf = plain_config(broker.bootstrap)
        props = {**conf.consumer, "group.id": "drift", "session.timeout.ms": 6000, "fetch.wait.max.ms": 20,
                 "isolation.level": "read_committed"}
        consumer = clients.consumer(props)
        consumer.subscribe(["in"])
        while not consumer.assignment():
            consumer.poll(0.1)
        tx = None
        if transactions:
            tx = clients.producer({**conf.producer, "transactional.id": f"drift-{uuid.uuid4().hex}"})
            tx.init_transactions(30)
        load = mp.get_context("spawn").Process(target=_produce, args=(broker.bootstrap, "in", rate, seconds))
        t0 = time.time()
        load.start()
        total, n, ages, pending, last_tx, commits = int(rate * seconds), 0, {}, [], time.monotonic(), 0
        deadline = time.monotonic() + seconds + 120
        while n < total and time.monotonic() < deadline:
            msgs = consumer.consume(256, 0.05)
            now = time.time()
            for m in msgs:
                if m.error() is not None:
                    continue
                n += 1
                created = m.timestamp()[1] / 1e3
                ages.setdefault(int((created - t0) // window_s), []).append(now - created)
                pending.append(m)
            if tx is None:
                pending.clear()
            elif pending and time.monotonic() - last_tx > 0.15:
                tx.begin_transaction()
                ends: dict[int, int] = {}
                for m in pending:
                    tx.produce("out", value=m.value()[:500], key=m.key(), partition=m.partition())
                    ends[m.partition()] = m.offset() + 1
                tx.send_offsets_to_transaction([TopicPartition("in", p, o) for p, o in ends.items()],
                                               consumer.consumer_group_metadata(), 30)
                tx.commit_transaction(30)
                pending, last_tx, commits = [], time.monotonic(), commits + 1
        load.join(60)
        consumer.close()
    windows = [{"from_s": k * window_s, "n": len(v), "age_p50_s": round(float(np.percentile(v, 50)), 4),
                "age_p99_s": round(float(np.percentile(v, 99)), 4)} for k, v in sorted(ages.items())]
    return {"partitions": partitions, "records": n, "transactions": commits, "windows": windows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=600.0, help="records per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--partitions", default="8,32", help="partition counts, one run each")
    ap.add_argument("--no-transactions", action="store_true", help="only consume (no output, no transactions)")
    ap.add_argument("--out", default=str(RESULTS / "broker_drift_cpu.json"))
    argv = list(sys.argv[1:] if argv is None else argv)
    a = ap.parse_args(argv)
    runs = [run(a.rate, a.seconds, int(p), not a.no_transactions) for p in a.partitions.split(",")]
    for r in runs:
        print(f"{r['partitions']} partitions, {r['records']} records, {r['transactions']} transactions; "
              "age at poll p50/p99 (ms) by 10 s: "
              + ", ".join(f"{1e3 * w['age_p50_s']:.0f}/{1e3 * w['age_p99_s']:.0f}" for w in r["windows"]))
    out = {"host": platform.node(), "cpus": mp.cpu_count(), "rate": a.rate, "seconds": a.seconds,
           "record_bytes": BODY, "transactions": not a.no_transactions, "runs": runs,
           "command": "bench/broker_drift.py " + " ".join(argv)}
    save(a.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
