"""Peak memory of a worker summarizing one large syslog document (about 4 MB).

The worker runs as a real process against a private embedded broker, tiny random model on
CPU, in one process (no preprocessing pool, no engine process: everything a document costs
shows in the worker's own RSS). First a small document (the worker's idle footprint once
it has summarized something), then one syslog document of --bytes bytes (RFC 5424-like
lines from worker.samples) as a JSON input of that size. Peak RSS is the kernel's VmHWM of
the worker process. `--label` names the run (a setting under test); runs of other labels
already in the output file are kept. The two runs of bench/results/doc_memory_cpu.json:

    .venv/bin/python -m bench.doc_memory --label whole --env RIBBON_PIPELINE__MAX_DOCUMENT_BYTES=1000000000
    .venv/bin/python -m bench.doc_memory --label capped    # pipeline.max_document_bytes at its default

(`whole`: the cap far above the document, so it is tokenized whole, as without the cap.)

Writes bench/results/doc_memory_cpu.json.
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
from confluent_kafka import Producer

from bench.held_bytes import count_committed, proc_kib
from bench.results_io import RESULTS, save
from worker.demo.samples import document
from worker.engine.tiny import make_tiny_checkpoint
from worker.kafka.broker import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[1]


def big_syslog(target: int) -> bytes:
    """A JSON input of a syslog document, at most `target` bytes."""
    lines: list[str] = []
    size, i = 64, 0
    while True:
        chunk = document(1 + 5 * i, n_lines=500, seed=28)["lines"]
        extra = sum(len(x) + 3 for x in chunk)
        if size + extra > target:
            break
        lines.extend(chunk)
        size += extra
        i += 1
    value = orjson.dumps({"lines": lines, "kind": "syslog", "source": "amf-2/syslog", "id": "big"})
    while len(value) > target:
        lines.pop()
        value = orjson.dumps({"lines": lines, "kind": "syslog", "source": "amf-2/syslog", "id": "big"})
    return value


def worker_env(bootstrap: str, model: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env.update({
        "RIBBON_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": "in",
        "RIBBON_KAFKA__OUTPUT_TOPIC": "out", "RIBBON_KAFKA__DLQ_TOPIC": "dlq",
        "RIBBON_KAFKA__GROUP_ID": f"g-{uuid.uuid4().hex[:6]}", "RIBBON_KAFKA__WORKER_SLOT": "0",
        "RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 6000}', "RIBBON_MODEL__PATH": model,
        "RIBBON_GENERATION__MAX_NEW_TOKENS": "16", "RIBBON_ENGINE__DEVICE": "cpu", "RIBBON_ENGINE__PROCESS": "off",
        "RIBBON_PIPELINE__PREPROCESS_PROCESSES": "0", "RIBBON_SERVER__PORT": "0", "RIBBON_LOG_FORMAT": "text",
        "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
    })
    env.update(extra)
    return env


def produce(bootstrap: str, value: bytes, key: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 8_000_000})
    p.produce("in", value=value, key=key)
    if p.flush(60):
        raise RuntimeError("input not produced")


def wait_outputs(bootstrap: str, proc: subprocess.Popen, want: int, timeout_s: float) -> tuple[int, int]:
    """(committed outputs + dead letters, peak KiB) once `want` inputs are done or the time is up."""
    deadline, peak, done = time.monotonic() + timeout_s, 0, 0
    while time.monotonic() < deadline and proc.poll() is None:
        peak = max(peak, proc_kib(proc.pid, "VmHWM"))
        done = count_committed(bootstrap, "out", want, 2)[0] + count_committed(bootstrap, "dlq", want, 1)[0]
        if done >= want:
            break
    if proc.poll() is None:
        peak = max(peak, proc_kib(proc.pid, "VmHWM"))
    return done, peak


def run(model: str, big: bytes, extra: dict[str, str], timeout_s: float, log: Path) -> dict:
    with EmbeddedBroker() as b:
        b.create_topics({"in": 1, "out": 1, "dlq": 1})
        with open(log, "ab") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=worker_env(b.bootstrap, model, extra),
                                    stdout=fh, stderr=fh, cwd=ROOT)
        try:
            produce(b.bootstrap, orjson.dumps(document(0, n_lines=20, seed=28)), b"small")
            _, idle = wait_outputs(b.bootstrap, proc, 1, timeout_s)
            idle_rss = proc_kib(proc.pid, "VmRSS") if proc.poll() is None else 0
            t0 = time.monotonic()
            produce(b.bootstrap, big, b"big")
            done, peak = wait_outputs(b.bootstrap, proc, 2, timeout_s)
            seconds = time.monotonic() - t0
            outs = count_committed(b.bootstrap, "out", 2, 2)[0]
            dlq = count_committed(b.bootstrap, "dlq", 1, 2)[0]
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(30)
    return {"document_bytes": len(big), "idle_peak_rss_mib": round(idle / 1024, 1),
            "idle_rss_mib": round(idle_rss / 1024, 1), "peak_rss_mib": round(peak / 1024, 1),
            "summaries": outs, "dead_letters": dlq, "completed": done >= 2, "seconds": round(seconds, 1),
            "settings": extra}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True, help="names this run in the output (e.g. before, after)")
    ap.add_argument("--bytes", type=int, default=3_990_000, help="size of the JSON input (kafka.max_message_bytes "
                                                                  "is 4,000,000 by default)")
    ap.add_argument("--env", action="append", default=[], help="RIBBON_X=Y settings for the worker")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--model", default="tiny-random", help="tiny-random (a tiny random Qwen2 built offline), "
                                                              "or a model.path the worker resolves, e.g. smollm2-135m")
    ap.add_argument("--out", default=str(RESULTS / "doc_memory_cpu.json"))
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="doc-memory-"))
    model = str(make_tiny_checkpoint(tmp / "tiny", arch="qwen2", seed=0)) if args.model == "tiny-random" \
        else args.model
    big = big_syslog(args.bytes)
    extra = dict(e.split("=", 1) for e in args.env)
    row = run(model, big, extra, args.timeout, tmp / "worker.log")
    row["log"], row["model"] = str(tmp / "worker.log"), args.model
    row["command"] = ["python", "-m", "bench.doc_memory", *(argv if argv is not None else sys.argv[1:])]
    print(f"{args.label}: {row['document_bytes']} bytes, idle {row['idle_rss_mib']} MiB, peak {row['peak_rss_mib']} "
          f"MiB, {row['summaries']} summaries, {row['dead_letters']} dead letters, {row['seconds']} s")
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    runs = {**old.get("runs", {}), args.label: row}
    save(out, {"bench": "doc_memory", "host": platform.node(), "python": platform.python_version(),
               "cpus": os.cpu_count(), "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
