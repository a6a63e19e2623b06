"""Windowed syslog: one-line records from many hosts at a steady rate, through the whole worker.

A producer sends `--records` one-line syslog records (worker/demo/lines.py) from `--hosts`
hosts, keyed by host, at `--rate` records/s to a fresh input topic; a worker (`ribbon run`, a
separate process, `windowing.enabled`) summarizes each host's windows; a reader takes the committed
outputs until their windows cover every record. Printed and saved as JSON:

- outputs per host and per window period (the stream's length / windowing.max_length_s), and why
  windows closed;
- latency: window close to output built (timing_ms.total, in the worker), and last record to visible
  (read_committed): the window's `end` (its last record's timestamp, set by the producer on this
  machine) to the reader's clock, less gap_s for windows closed on their gap. An upper bound of close
  to visible: a window closed by time closes between its last record and its key's next one (1/40 s
  apart at 2,000 records/s from 50 hosts);
- the worker's peak RSS (VmHWM);
- output bytes / input bytes: raw, and on the wire with each compression.type (the outputs produced
  again through librdkafka, in the bursts they arrived in, bytes from its statistics, tx_bytes);
- coverage: records uncovered, and covered by more than one output.

`--capacity` runs the stream as a backlog at the engine's capacity instead: the worker in this process
against the engine alone over the prompts it built, worker overhead as `python -m bench.e2e` reports it
(bench/windows_capacity.py).

    python -m bench.windows                      # CPU, digest mode: bench/results/windows_cpu.json
    python -m bench.windows --mode generative --model PATH --device cuda --out bench/results/windows_h200.json
    python -m bench.windows --capacity --records 20000     # the engine's capacity (bench/windows_capacity.py)
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
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition

from bench import windows_capacity
from bench.results_io import RESULTS, machine_name, save
from bench.parts import random_checkpoint
from worker.demo.lines import syslog_stream
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import plain_config

ROOT = Path(__file__).resolve().parents[1]

CODECS = ("none", "lz4", "zstd")


def worker_env(args, bootstrap: str, topics: dict[str, str], group: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env.update({
        "RIBBON_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": topics["in"],
        "RIBBON_KAFKA__OUTPUT_TOPIC": topics["out"], "RIBBON_KAFKA__DLQ_TOPIC": topics["dlq"],
        "RIBBON_KAFKA__GROUP_ID": group,
        "RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 6000, "fetch.wait.max.ms": 20}',
        "RIBBON_MODEL__MODE": args.mode, "RIBBON_ENGINE__DEVICE": args.device,
        "RIBBON_WINDOWING__ENABLED": "true", "RIBBON_WINDOWING__GAP_S": str(args.gap_s),
        "RIBBON_WINDOWING__MAX_LENGTH_S": str(args.max_length_s),
        "RIBBON_SERVER__PORT": str(args.metrics_port), "RIBBON_LOG_FORMAT": "text", "PYTHONUNBUFFERED": "1",
    })
    if args.model:
        env["RIBBON_MODEL__PATH"] = args.model
    if args.compression:
        env["RIBBON_KAFKA__PRODUCER_EXTRA"] = json.dumps({"compression.type": args.compression})
    return env


def produce_steady(bootstrap: str, topic: str, args, sent: list[int], input_bytes: list[int]) -> None:
    p = clients.producer(plain_config(bootstrap).tool_producer())
    start = time.monotonic()
    for i, (host, line) in enumerate(syslog_stream(args.records, args.hosts, seed=args.seed, rate=args.rate)):
        value = line.encode()
        windows_capacity.send(p, topic, value, host.encode())
        sent[0], input_bytes[0] = i + 1, input_bytes[0] + len(value)
        time.sleep(max(0.0, start + (i + 1) / args.rate - time.monotonic()))
    if p.flush(60):
        raise RuntimeError("input not acknowledged")


def read_outputs(bootstrap: str, topic: str, partitions: int, total: list[int], done: threading.Event,
                 timeout_s: float) -> list[tuple[float, bytes, float]]:
    """(wall time received, value, the output's own timestamp: when delivery produced it) of committed outputs until their records add up to `total[0]`."""
    c = clients.consumer(plain_config(bootstrap).tool_consumer(f"wb-{uuid.uuid4().hex[:8]}",
                                                               **{"isolation.level": "read_committed"}))
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[tuple[float, bytes]] = []
    covered = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not (done.is_set() and covered >= total[0]):
        for m in c.consume(500, 0.2):
            if m.error() is None:
                out.append((time.time(), m.value(), m.timestamp()[1] / 1e3))
                covered += orjson.loads(m.value())["window"]["records"]
    c.close()
    return out


def wire_bytes(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes], bursts: list[int],
               codec: str) -> tuple[int, float]:
    """(bytes librdkafka sent, CPU seconds) producing `values` with `codec`, burst by burst (flushed between)."""
    stats: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "statistics.interval.ms": 100, "stats_cb": stats.append})
    p.poll(0.5)
    base = json.loads(stats[-1])["tx_bytes"] if stats else 0
    cpu = time.process_time()
    i = 0
    for n in bursts:
        for v, k in zip(values[i:i + n], keys[i:i + n]):
            p.produce(topic, value=v, key=k)
        p.flush(30)
        i += n
    cpu = time.process_time() - cpu
    time.sleep(0.3)
    p.poll(0.3)
    return json.loads(stats[-1])["tx_bytes"] - base, cpu


def bursts_of(times: list[float], gap_s: float = 0.05) -> list[int]:
    """Sizes of runs of outputs received within `gap_s` of each other (about one transaction each)."""
    sizes, last = [], None
    for t in times:
        if last is None or t - last > gap_s:
            sizes.append(0)
        sizes[-1] += 1
        last = t
    return sizes


def wait_assigned(log: str, since: int, proc, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log, "rb") as fh:
            fh.seek(since)
            if b"assigned [(" in fh.read():
                return
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}); see {log}")
        time.sleep(0.1)
    raise RuntimeError(f"the worker was not assigned within {timeout_s:.0f} s; see {log}")


def metric_means(port: int, names: tuple[str, ...]) -> dict[str, float | None]:
    """Mean of each histogram (sum / count) from the worker's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    vals = {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines() if ln and not ln.startswith("#")}
    return {n: round(vals[f"{n}_sum"] / vals[f"{n}_count"], 4) if vals.get(f"{n}_count") else None for n in names}


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else 0.0


def run(args, bootstrap: str, broker=None) -> dict:
    tag = uuid.uuid4().hex[:8]
    topics = {"in": f"wb-in-{tag}", "out": f"wb-out-{tag}", "dlq": f"wb-dlq-{tag}", "scratch": f"wb-z-{tag}"}
    if broker is not None:
        broker.create_topics({topics["in"]: args.partitions, topics["out"]: args.partitions, topics["dlq"]: 1,
                              topics["scratch"]: args.partitions})
    log = open(args.log, "ab")  # noqa: SIM115 - the worker's output, kept for a failed run
    since = Path(args.log).stat().st_size
    proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], cwd=ROOT, stdout=log, stderr=log,
                            env=worker_env(args, bootstrap, topics, f"wb-{tag}"))
    sent, input_bytes, done = [0], [0], threading.Event()
    total = [args.records]
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(read_outputs(
        bootstrap, topics["out"], args.partitions, total, done, args.timeout_s)), daemon=True)
    reader.start()
    try:
        wait_assigned(args.log, since, proc, 120)  # the stream starts when the worker reads it
        t0 = time.time()
        produce_steady(bootstrap, topics["in"], args, sent, input_bytes)
        stream_s = time.time() - t0
        done.set()
        reader.join(args.timeout_s)
        rss = peak_rss(proc.pid)
        means = metric_means(args.metrics_port, ("ribbon_record_age_seconds", "ribbon_delivery_step_seconds"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    outs = [orjson.loads(v) for _, v, _ in got]
    values = [v for _, v, _ in got]
    keys = [o["window"]["key"].encode() for o in outs]
    bursts = bursts_of([t for t, _, _ in got])
    wire = {c: wire_bytes(bootstrap, topics["scratch"], values, keys, bursts, c) for c in CODECS}
    per_host: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for o in outs:
        per_host[o["window"]["key"]] = per_host.get(o["window"]["key"], 0) + 1
        reasons[o["window"]["closed_by"]] = reasons.get(o["window"]["closed_by"], 0) + 1
    periods = stream_s / args.max_length_s
    close_to_built = [o["timing_ms"]["total"] for o in outs]

    visible = [(t - datetime.fromisoformat(o["window"]["end"].replace("Z", "+00:00")).timestamp()
                - (args.gap_s if o["window"]["closed_by"] == "gap" else 0.0)) * 1e3 for (t, _, _), o in zip(got, outs)]
    produced_to_visible = [(t - ts) * 1e3 for t, _, ts in got]
    records = sum(o["window"]["records"] for o in outs)
    out_bytes = sum(len(v) for v in values)
    return {
        "benchmark": "windows", "machine": machine_name(args.device), "python": platform.python_version(),
        "settings": {k: getattr(args, k) for k in ("records", "hosts", "rate", "partitions", "gap_s", "max_length_s",
                                                   "mode", "model", "device", "compression")},
        "stream_s": round(stream_s, 1), "records_sent": sent[0], "records_covered": records,
        "outputs": len(outs), "records_per_output": round(records / max(1, len(outs)), 1),
        "outputs_per_host": {"mean": round(len(outs) / max(1, len(per_host)), 2), "min": min(per_host.values(),
                             default=0), "max": max(per_host.values(), default=0), "hosts": len(per_host)},
        "outputs_per_host_per_window_period": round(len(outs) / max(1, len(per_host)) / periods, 2),
        "closed_by": reasons,
        "close_to_output_built_ms": {"p50": pct(close_to_built, 0.5), "p99": pct(close_to_built, 0.99)},
        "last_record_to_visible_ms": {"p50": pct(visible, 0.5), "p99": pct(visible, 0.99), "max": pct(visible, 1.0),
                                      "note": "less gap_s for gap closes; an upper bound of close to visible"},
        "output_produced_to_visible_ms": {"p50": pct(produced_to_visible, 0.5), "p99": pct(produced_to_visible, 0.99),
                                          "note": "the output's timestamp (in its transaction) to the reader: the "
                                                  "commit and the read"},
        "worker_means_s": {"record_age_at_poll": means["ribbon_record_age_seconds"],
                           "delivery_step": means["ribbon_delivery_step_seconds"]},
        "load_average_1m": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count(),
        "worker_peak_rss_bytes": rss,
        "input_bytes": input_bytes[0], "output_bytes": out_bytes,
        "output_over_input_raw": round(out_bytes / input_bytes[0], 4),
        "output_over_input_wire": {c: round(b / input_bytes[0], 4) for c, (b, _) in wire.items()},
        "output_wire_bytes": {c: b for c, (b, _) in wire.items()},
        "output_compress_cpu_s": {c: round(s, 3) for c, (_, s) in wire.items()},
        "method": "outputs produced again through librdkafka (linger.ms 5) in the bursts they arrived in; "
                  "wire bytes = the producer's tx_bytes statistic (payload plus request framing)",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rate", type=float, default=2_000.0, help="records per second")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--gap-s", type=float, default=5.0)
    ap.add_argument("--max-length-s", type=float, default=10.0)
    ap.add_argument("--mode", choices=("digest", "generative"), default="digest")
    ap.add_argument("--model", help="model path (generative mode)")
    ap.add_argument("--arch-config", help="generative mode on random weights of this architecture (config JSON)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                    help="the worker producer's compression.type (kafka.producer_extra; default zstd)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metrics-port", type=int, default=19464, help="the worker's /metrics port (read at the end)")
    ap.add_argument("--bootstrap", help="an existing cluster (default: the embedded broker)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="longest wait for the outputs after the stream")
    ap.add_argument("--log", default="/tmp/ribbon-bench-windows.log", help="the worker's log")
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/windows_cpu.json; with "
                                                "--capacity, windows-capacity-run_cpu.json)")
    cap = ap.add_argument_group("capacity", "--capacity: a backlog at the engine's capacity, the worker against "
                                            "the engine alone (bench/windows_capacity.py)")
    cap.add_argument("--capacity", action="store_true", help="generative mode, the worker in this process")
    cap.add_argument("--max-lines", type=int, default=400, help="windowing.max_lines (400: the records of a 10 s "
                                                                "window of a host at 2,000 records/s from 50 hosts)")
    cap.add_argument("--max-new-tokens", type=int, default=16)
    cap.add_argument("--token-budget", default="auto")
    cap.add_argument("--process", choices=("auto", "on", "off"), default="auto",
                     help="engine.process: the model in its own process (auto: on CUDA)")
    args = ap.parse_args(argv)
    if args.capacity:
        args.out = args.out or str(RESULTS / "windows-capacity-run_cpu.json")  # windows-capacity_cpu.json: bench/windows_pair.py
        return windows_capacity.main(args, argv)
    args.out = args.out or str(RESULTS / "windows_cpu.json")
    if args.arch_config:
        args.model = random_checkpoint(args.arch_config, Path(tempfile.mkdtemp(prefix="ribbon-windows-")))
    if args.bootstrap:
        result = run(args, args.bootstrap)
    else:
        with EmbeddedBroker() as broker:
            result = run(args, broker.bootstrap, broker)
    print(json.dumps(result, indent=2))
    save(args.out, result)
    return 0 if result["records_covered"] == result["records_sent"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
