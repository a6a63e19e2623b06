"""The tests' Apache Kafka (one KRaft node from Maven Central jars): start time and memory.

Run from the repository root (the launcher is the tests' fixture, tests/apache_kafka.py, not product code):

    .venv/bin/python -m bench.kafka_broker [--runs 3] [--records 20000]

Each run formats fresh storage and starts the broker (tests/apache_kafka.py, the same code as the
pytest fixture), timing start → first metadata answer, then sends `--records` small records in
transactions of 100 with a read_committed read-back, and reads the JVM's RSS (VmRSS, VmHWM) after
start and after the load, and the machine's 1-minute load average before each start (the start time
grows with it: the machine is shared). Jars are fetched before the first run (not timed). Writes
bench/results/kafka_broker_<machine>.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import uuid

from confluent_kafka import Consumer, Producer

from bench.results_io import RESULTS, save
from tests.apache_kafka import HEAP, ApacheKafka, jars_dir, kafka_version


def rss_mb(pid: int) -> dict[str, float]:
    fields = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(rest.split()[0]) / 1024
    return fields


def load(bootstrap: str, records: int) -> float:
    topic = f"bench-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "linger.ms": 5})
    p.init_transactions(30)
    for start in range(0, records, 100):
        p.begin_transaction()
        for i in range(start, min(records, start + 100)):
            p.produce(topic, value=b"x" * 200, key=b"%d" % i)
        p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(1000, 0.5) if m.error() is None)
    c.close()
    if got < records:
        raise RuntimeError(f"read back {got} of {records}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--machine", default="cpu")
    args = ap.parse_args()
    jars_dir()  # fetched once, not timed
    runs = []
    for _ in range(args.runs):
        load_avg_1m = os.getloadavg()[0]  # the machine is shared: say how busy it was
        b = ApacheKafka()
        b.overrides["auto.create.topics.enable"] = "true"
        t0 = time.monotonic()
        b.start()
        start_s = time.monotonic() - t0
        try:
            after_start = rss_mb(b.pid)
            load_s = load(b.bootstrap, args.records)
            after_load = rss_mb(b.pid)
        finally:
            b.stop()
        run = {"load_avg_1m": round(load_avg_1m, 2), "start_s": round(start_s, 2), "rss_after_start_mb": round(after_start["VmRSS"], 1),
               "load_s": round(load_s, 2), "rss_after_load_mb": round(after_load["VmRSS"], 1),
               "rss_peak_mb": round(after_load["VmHWM"], 1)}
        print(run)
        runs.append(run)
    result = {
        "benchmark": "kafka_broker", "kafka_version": kafka_version(), "heap": HEAP,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "args": vars(args), "records": args.records, "runs": runs,
        "median": {k: statistics.median(r[k] for r in runs) for k in runs[0]},
    }
    print("median:", result["median"])
    save(RESULTS / f"kafka_broker_{args.machine}.json", result)


if __name__ == "__main__":
    main()
