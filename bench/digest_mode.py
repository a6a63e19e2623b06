"""Digest mode's throughput: the whole worker with no model, topic to topic, per pool size.

Issue 8 says digest mode "runs on any machine, at the speed of Kafka and the digest". This measures
that speed on the embedded broker: the same documents are produced once per variant to fresh
topics, and a worker in digest mode (consume, validate, digest, render, produce + commit in
transactions) runs until every output is readable (read_committed). Variants side by side in one
run: `pipeline.preprocess_processes` 0 (the ingest thread digests) and the sizes given.

It is also the worker's ceiling without a model: ingest, finishing and delivery alone, which is what
the end-to-end benchmark's engine must not outrun (issue 9).

    python -m bench.digest_mode --documents 2000 --corpus mixed --processes 0,2
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from bench.e2e import CORPORA
from worker.config.settings import load_settings
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import embedded_settings, plain_config
from worker.pipeline.app import Worker


def _lines(docs: list[dict]) -> int:
    return sum(sum(1 for ln in d["lines"] if ln.strip()) for d in docs)


def one_variant(broker, settings, docs: list[dict], processes: int, timeout_s: float) -> dict:
    """Produce `docs` to fresh topics, run a digest-mode worker with `processes` pool processes until
    every output is committed; docs/s from the first assignment (group join reported apart)."""
    tag = uuid.uuid4().hex[:8]
    topics = {"in": f"dm-in-{tag}", "out": f"dm-out-{tag}", "dlq": f"dm-dlq-{tag}"}
    broker.create_topics({topics["in"]: 8, topics["out"]: 8, topics["dlq"]: 1})
    conf = plain_config(broker.bootstrap)
    prod = clients.producer(conf.tool_producer())
    for i, d in enumerate(docs):
        prod.produce(topics["in"], value=orjson.dumps(d), key=str(i).encode())
        prod.poll(0)
    prod.flush(60)
    s = settings.model_copy(update={
        "kafka": settings.kafka.model_copy(update={"input_topics": (topics["in"],), "output_topic": topics["out"],
                                                   "dlq_topic": topics["dlq"], "group_id": f"dm-{tag}"}),
        "pipeline": settings.pipeline.model_copy(update={"preprocess_processes": processes})})
    worker = Worker(embedded_settings(s, broker.bootstrap), broker.bootstrap)
    reader = clients.consumer(conf.tool_consumer(f"dm-reader-{tag}", **{"isolation.level": "read_committed"}))
    reader.assign([TopicPartition(topics["out"], p, OFFSET_BEGINNING) for p in range(8)])
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    worker.start()
    worker.ingest.assigned.wait(60)
    t_assigned = time.perf_counter()
    ids: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while len(ids) < len(docs) and time.monotonic() < deadline:
        for m in reader.consume(1000, 0.1):
            if m.error() is None:
                ids.add(orjson.loads(m.value())["id"])
    t1 = time.perf_counter()
    cpu = time.process_time() - cpu0
    sample = worker.metrics.registry.get_sample_value
    digest_s = float(sample("ribbon_digest_seconds_total") or 0.0)
    digest_wall_s = float(sample("ribbon_digest_wall_seconds_total") or 0.0)
    reader.close()
    worker.drain(30)
    worker.close()
    steady = t1 - t_assigned
    return {"preprocess_processes": processes, "outputs": len(ids), "complete": len(ids) == len(docs),
            "group_join_s": round(t_assigned - t0, 3), "steady_s": round(steady, 3),
            "docs_per_s": len(ids) / steady, "lines_per_s": _lines(docs) * len(ids) / len(docs) / steady,
            "worker_process_cpu_s": round(cpu, 3), "digest_cpu_s": round(digest_s, 3),
            "digest_on_ingest_thread_s": round(digest_wall_s, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="mixed")
    ap.add_argument("--processes", default="0,2", help="pool sizes to compare, side by side (default 0,2)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default="bench/results/digest_mode_cpu.json")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)


    docs = CORPORA[a.corpus](a.documents)
    settings = load_settings(overrides={"model.mode": "digest", "server.port": 0, "log_level": "WARNING"})
    runs = []
    with EmbeddedBroker() as broker:
        for p in [int(x) for x in a.processes.split(",")]:
            r = one_variant(broker, settings, docs, p, a.timeout)
            runs.append(r)
            print(f"pool {p}: {r['docs_per_s']:,.0f} docs/s, {r['lines_per_s']:,.0f} lines/s "
                  f"({r['outputs']}/{len(docs)} outputs in {r['steady_s']:.2f} s after a {r['group_join_s']:.1f} s "
                  f"group join); digest {r['digest_cpu_s']:.2f} CPU s, {r['digest_on_ingest_thread_s']:.2f} s on "
                  f"the ingest thread; worker process CPU {r['worker_process_cpu_s']:.2f} s")
    result = {"bench": "digest mode, topic to topic (embedded broker)", "corpus": a.corpus,
              "documents": len(docs), "lines": _lines(docs), "machine": platform.machine(),
              "cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
              "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "runs": runs,
              "command": "python -m bench.digest_mode " + " ".join(argv if argv is not None else [])}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {a.out}")
    return 0 if all(r["complete"] for r in runs) else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
