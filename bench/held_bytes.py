"""Peak memory of a worker holding large dead letters behind one slow document.

One partition: a long document (chunked, summarized in rounds: slow) at offset 0, then
N bad messages of S bytes each (invalid UTF-8: dead-lettered at once), then one good
document. Every dead letter must wait for offset 0 before it commits. The worker runs
as a real process against a private embedded broker, tiny random model on CPU, with
the dead-letter spill off (0: values held in memory) and at the worker's threshold
(DEAD_LETTER_SPILL_BYTES, 64 KiB: values wait in an unlinked temp file; no setting names it, so the
benchmark sets the constant in the worker process it starts). Sizes near and above the limits are
included: above kafka.max_message_bytes the input is an `oversize` dead letter, and
above the producer's message.max.bytes its copy goes without the value.

Prints a table, writes bench/results/held_bytes_cpu.json.

    .venv/bin/python -m bench.held_bytes [--count 200] [--sizes 1000000,3900000,4050000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from worker.demo.samples import document
from worker.engine.tiny import make_tiny_checkpoint
from worker.kafka.broker import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def worker_env(bootstrap: str, model: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env.update({
        "RIBBON_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": "in",
        "RIBBON_KAFKA__OUTPUT_TOPIC": "out", "RIBBON_KAFKA__DLQ_TOPIC": "dlq",
        "RIBBON_KAFKA__GROUP_ID": f"g-{uuid.uuid4().hex[:6]}", "RIBBON_KAFKA__WORKER_SLOT": "0",
        "RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 6000}',
        "RIBBON_MODEL__PATH": model, "RIBBON_GENERATION__MAX_NEW_TOKENS": "16", "RIBBON_ENGINE__DEVICE": "cpu",
        "RIBBON_GENERATION__MAX_INPUT_TOKENS": "600", "RIBBON_BATCHING__TOKEN_BUDGET": "65536",
        "RIBBON_SERVER__PORT": "0", "RIBBON_LOG_FORMAT": "text", "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
    })
    return env


def produce_case(bootstrap: str, count: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "message.max.bytes": max(1_000_000, size + 100_000)})
    p.produce("in", value=orjson.dumps(document(0, n_lines=3000, seed=9)), key=b"slow")
    bad = b"\xff" + os.urandom(max(0, size - 1))  # invalid UTF-8 from the first byte
    for i in range(count):
        p.produce("in", value=bad, key=f"bad-{i}".encode())
        p.poll(0)
        if i % 20 == 19:
            p.flush(60)
    p.produce("in", value=orjson.dumps(document(1, n_lines=3, seed=9)), key=b"last")
    if p.flush(120):
        raise RuntimeError("inputs not produced")


def count_committed(bootstrap: str, topic: str, want: int, timeout_s: float) -> tuple[int, int]:
    """Committed records of partition 0 of `topic` (assign(), not a group: no join wait on the embedded broker)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "receive.message.max.bytes": 200_000_000})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    n, no_value, deadline = 0, 0, time.monotonic() + timeout_s
    try:
        while n < want and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                if m.error() is None:
                    n += 1
                    no_value += m.value() is None
    finally:
        c.close()
    return n, no_value


def proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def run_case(model: str, count: int, size: int, spill: int, timeout_s: float, log: Path) -> dict:
    with EmbeddedBroker() as b:
        b.create_topics({"in": 1, "out": 1, "dlq": 1})
        produce_case(b.bootstrap, count, size)
        t0 = time.monotonic()
        with open(log, "ab") as fh:
            start = (f"import runpy, worker.pipeline.app as app; app.DEAD_LETTER_SPILL_BYTES = {spill}; "
                     "runpy.run_module('worker', run_name='__main__')")
            proc = subprocess.Popen([sys.executable, "-c", start, "run"], env=worker_env(b.bootstrap, model),
                                    stdout=fh, stderr=fh, cwd=ROOT)
        dlq = outs = dropped = 0
        peak = 0
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and proc.poll() is None:
                peak = max(peak, proc_kib(proc.pid, "VmHWM"))
                outs, _ = count_committed(b.bootstrap, "out", 2, 2)
                if outs >= 2:
                    dlq, dropped = count_committed(b.bootstrap, "dlq", count, 60)
                    break
            peak = max(peak, proc_kib(proc.pid, "VmHWM")) if proc.poll() is None else peak
            elapsed = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(30)
    done = outs >= 2 and dlq >= count
    text = log.read_text(errors="replace")
    return {"size_bytes": size, "count": count, "spill_bytes": spill, "peak_rss_mib": round(peak / 1024, 1),
            "held_input_mib": round(size * count / 2**20, 1), "summaries": outs, "dead_letters": dlq,
            "dead_letters_without_value": dropped, "paused_by_backpressure": text.count(" paused "),
            "completed": done, "seconds": round(elapsed, 1), "exit_code": proc.returncode}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--sizes", default="1000000,3900000,4050000")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--out", default=str(RESULTS / "held_bytes_cpu.json"))
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="held-bytes-"))
    model = str(make_tiny_checkpoint(tmp / "tiny", arch="qwen2", seed=0))
    rows = []
    print(f"{'size':>9} {'spill':>6} {'peak RSS MiB':>12} {'held MiB':>8} {'done':>5} {'s':>6}")
    cases = [(0, 65_536)] + [(int(x), spill) for x in args.sizes.split(",") for spill in (0, 65_536)]
    for size, spill in cases:  # the first: no bad messages at all (the worker's own footprint)
        row = run_case(model, args.count if size else 0, size, spill, args.timeout, tmp / f"worker-{size}-{spill}.log")
        rows.append(row)
        print(f"{size:>9} {spill:>6} {row['peak_rss_mib']:>12} {row['held_input_mib']:>8} "
              f"{str(row['completed']):>5} {row['seconds']:>6}", flush=True)
    out = {"bench": "held_bytes", "host": platform.node(), "python": platform.python_version(),
           "cpus": os.cpu_count(), "logs": str(tmp), "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
