"""The windowed syslog stream at the engine's capacity: the worker against the engine alone.

Run as `python -m bench.windows --capacity` (generative mode). As `python -m bench.e2e` does for
documents, in one process, with one warm engine (bench/parts.py) and one token budget:

- end to end: `--records` one-line syslog records from `--hosts` hosts (worker/demo/lines.py), keyed by
  host, go into a fresh input topic as fast as the producer sends them (a backlog, not a rate). The
  windowed worker (windowing.enabled, in this process, sharing the engine) drains it. Once it has
  consumed every record, the stream ends: the worker drains (its last windows close at once, as on
  SIGTERM), so the time holds no wait for a session gap. Timed from the first record consumed to the
  last output read (read_committed, by a reader in a process of its own, bench/loadgen.py).
- engine only: the prompts the worker gave its packer (recorded as submitted, `RecordingPacker`),
  packed again by the real packer and run straight on the engine (bench/e2e.py `engine_only`).

worker_overhead_pct = 100 * (1 - windows/s end to end / windows/s engine only), as for documents.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
import uuid
from collections.abc import Sequence

import numpy as np
import torch

from bench.results_io import machine_name, save
from bench.e2e import engine_only
from bench.loadgen import OutputReader, OutputTopic
from bench.parts import load_parts
from bench.timeline import end_parts, model_counters, overhead_parts, sample_timeline
from worker.demo.lines import syslog_stream
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import embedded_settings, plain_config
from worker.packer import Packer, PackerConfig
from worker.pipeline.app import Parts, Worker, packer_device


class RecordingPacker(Packer):
    """The worker's packer, keeping a copy of every sequence submitted: the prompts the worker built."""

    def __init__(self, config, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.submitted: list[np.ndarray] = []  # int32 [tokens] each, in submission order

    def submit(self, seq_id: int, tokens, key: int) -> None:
        super().submit(seq_id, tokens, key)
        self.submitted.append(np.array(tokens, dtype=np.int32))

    def submit_many(self, items: Sequence[tuple]) -> None:
        super().submit_many(items)
        self.submitted.extend(np.array(t, dtype=np.int32) for _, t, _ in items)


def send(p, topic: str, value: bytes, key: bytes) -> None:
    """One record, waiting for deliveries while the producer's local queue is full."""
    while True:
        try:
            p.produce(topic, value=value, key=key)
            break
        except BufferError:
            p.poll(0.05)
    p.poll(0)


def overhead_pct(end_to_end_per_s: float, engine_per_s: float) -> float:
    """The worker's cost as e2e reports it: the share of the engine's rate the worker does not reach."""
    if engine_per_s <= 0:
        raise ValueError(f"the engine's rate must be > 0, got {engine_per_s}")
    return 100.0 * (1.0 - end_to_end_per_s / engine_per_s)


def process_cpu_s() -> float:
    """CPU seconds of this process so far, every thread (the tokenizer's and torch's pools too); the broker,
    the output reader, an engine process and the preprocessing pool's processes are processes of their own."""
    t = os.times()
    return t.user + t.system


def thread_cpu_s(native_id: int | None) -> float | None:
    """CPU seconds (user + system) of one thread of this process so far (Linux /proc; None elsewhere)."""
    try:
        fields = open(f"/proc/self/task/{native_id}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)


def produce_backlog(bootstrap: str, topic: str, args) -> dict:
    """Every record as fast as the producer goes; (records, bytes, seconds to acknowledged)."""
    p = clients.producer(plain_config(bootstrap).tool_producer())
    n = size = 0
    t0 = time.monotonic()
    for host, line in syslog_stream(args.records, args.hosts, seed=args.seed, rate=args.rate):
        value = line.encode()
        send(p, topic, value, host.encode())
        n, size = n + 1, size + len(value)
    if p.flush(120):
        raise RuntimeError("input not acknowledged")
    took = time.monotonic() - t0
    return {"records": n, "bytes": size, "seconds": round(took, 3), "records_per_s": round(n / took, 1)}


def drain_windows(settings, parts, bootstrap: str, topics: dict, records: int, timeout_s: float) -> dict:
    """The windowed worker over the backlog: the figures, and the prompts it built ("prompts")."""
    s = embedded_settings(settings, bootstrap)
    config = PackerConfig.from_settings(s.batching, parts.budget, parts.reserve)
    packer = RecordingPacker(config, "cuda" if packer_device(parts.engine).startswith("cuda") else "cpu")
    worker = Worker(s, bootstrap, parts=Parts(parts.engine, packer, parts.budget, parts.reserve))
    reader = OutputReader(OutputTopic(bootstrap, topics["out"], topics["partitions"]), records, timeout_s, windows=True)
    timeline: list[dict] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_timeline, args=(worker, timeline, stop), daemon=True)
    t0, cpu0 = time.monotonic(), process_cpu_s()
    sampler.start()
    worker.start()
    worker.ingest.assigned.wait(60)
    t_assigned = time.monotonic()
    deadline = t_assigned + timeout_s
    while not (timeline and timeline[-1]["consumed"] >= records) and time.monotonic() < deadline:
        if worker.failed() is not None:
            raise RuntimeError(f"the worker failed: {worker.failed()}")
        time.sleep(0.02)
    t_consumed = time.monotonic()
    drained = worker.drain(max(1.0, deadline - time.monotonic()))  # the stream's end: its last windows close
    read = reader.result()
    cpu = process_cpu_s() - cpu0
    t1 = max((v[0] for v in read.values()), default=time.monotonic())
    stop.set()
    sampler.join(5)
    c = model_counters(worker)
    bins, busy = c["bins"], c["busy_s"]
    closed = {s.labels["reason"]: int(s.value) for m in worker.metrics.registry.collect()
              if m.name == "ribbon_windows_closed" for s in m.samples if s.name.endswith("_total")}
    threads_cpu = {t.name: thread_cpu_s(t.native_id) for t in threading.enumerate() if t.name.startswith("ribbon-")}
    digest = {"cpu_s": round(c["digest_s"], 3), "ingest_wait_s": round(c["digest_wall_s"], 3)}
    worker.close()
    t_first = t0 + next((x["t"] for x in timeline if x["consumed"] > 0), t_assigned - t0)
    steady = t1 - t_first
    windows = len(read)
    in_tok = int(sum(len(p) for p in packer.submitted))  # the prompts' tokens, as the engine-only figure counts
    out_tok = sum(v[2]["output"] for v in read.values())
    return {"windows": windows, "records_covered": sum(v[3] for v in read.values()), "drained": drained,
            "closed_by": closed, "group_join_s": round(t_assigned - t0, 3),
            "first_record_after_assignment_s": round(t_first - t_assigned, 3),
            "all_consumed_s": round(t_consumed - t_first, 3), "wall_s": round(steady, 3),
            "windows_per_s": round(windows / steady, 3), "records_per_s": round(records / steady, 1),
            "input_tokens": in_tok, "output_tokens": out_tok,
            "input_tokens_per_s": round(in_tok / steady, 1), "output_tokens_per_s": round(out_tok / steady, 1),
            "bins": bins, "gpu_busy_s": round(busy, 3), "gpu_busy_fraction": round(busy / steady, 3),
            "overhead_s": overhead_parts(timeline, t_assigned - t0, t1 - t_assigned, busy, bins),
            "end_s": end_parts(timeline, t_assigned - t0, t1 - t_assigned, records),
            "process_cpu_s": round(cpu, 3), "threads_cpu_s": threads_cpu, "digest": digest,
            "prompts": packer.submitted}


def run_capacity(args, argv: Sequence[str] | None) -> dict:
    tag = uuid.uuid4().hex[:8]
    topics = {"in": f"wc-in-{tag}", "out": f"wc-out-{tag}", "dlq": f"wc-dlq-{tag}", "partitions": args.partitions}
    args.model = args.model or (None if args.arch_config else "tiny-random")
    ns = argparse.Namespace(model=args.model, arch_config=args.arch_config,
                            max_new_tokens=args.max_new_tokens, device=args.device, token_budget=args.token_budget,
                            process=args.process)
    overrides = {"model.mode": "generative", "kafka.input_topics": topics["in"], "kafka.output_topic": topics["out"],
                 "kafka.dlq_topic": topics["dlq"], "kafka.group_id": f"wc-{tag}", "windowing.enabled": True,
                 "windowing.gap_s": args.gap_s, "windowing.max_length_s": args.max_length_s,
                 "windowing.max_lines": args.max_lines, "kafka.producer_extra.compression.type": args.compression}
    settings, parts, cleanup = load_parts(ns, overrides)
    try:
        with EmbeddedBroker() as broker:
            broker.create_topics({topics["in"]: args.partitions, topics["out"]: args.partitions, topics["dlq"]: 1})
            produced = produce_backlog(broker.bootstrap, topics["in"], args)
            e2e = drain_windows(settings, parts, broker.bootstrap, topics, produced["records"], args.timeout_s)
        prompts = e2e.pop("prompts")
        cpu0 = process_cpu_s()
        only = engine_only(parts, prompts, list(range(len(prompts))), e2e["windows"])
        only["process_cpu_s"] = process_cpu_s() - cpu0
        only = {k: round(v, 3) if isinstance(v, float) else v for k, v in only.items()}
        only["windows_per_s"] = only.pop("docs_per_s")
        eng = parts.engine
        if eng.device.type == "cuda":
            device = getattr(eng, "device_name", None) or torch.cuda.get_device_name()
        else:
            device = platform.processor() or "cpu"
        backend, budget = eng.backend, parts.budget
    finally:
        cleanup()
    return {
        "benchmark": "windows-capacity", "machine": machine_name(args.device), "device": device, "backend": backend,
        "settings": {k: getattr(args, k) for k in ("records", "hosts", "partitions", "gap_s", "max_length_s",
                                                   "max_lines", "model", "arch_config", "device",
                                                   "max_new_tokens", "token_budget", "process", "compression")},
        "token_budget": budget, "producer": produced, "prompts": len(prompts),
        "prompt_tokens": int(sum(len(p) for p in prompts)),
        "end_to_end": e2e, "engine_only": only,
        "worker_overhead_pct": round(overhead_pct(e2e["windows_per_s"], only["windows_per_s"]), 1),
        "command": "python -m bench.windows " + " ".join(sys.argv[1:] if argv is None else argv),
    }


def report(r: dict, out: str) -> None:
    e, o = r["end_to_end"], r["engine_only"]
    print(f"producer: {r['producer']['records']:,} records in {r['producer']['seconds']:.2f} s "
          f"({r['producer']['records_per_s']:,.0f}/s)")
    print(f"{'':14}{'windows/s':>10}{'in tok/s':>12}{'out tok/s':>12}{'wall s':>9}")
    for name, x in (("engine only", o), ("end to end", e)):
        print(f"{name:14}{x['windows_per_s']:10.1f}{x['input_tokens_per_s']:12.0f}{x['output_tokens_per_s']:12.0f}"
              f"{x['wall_s']:9.2f}")
    print(f"{e['windows']} windows covering {e['records_covered']:,} records ({e['records_per_s']:,.0f} records/s "
          f"end to end), closed by {e['closed_by']}; every record consumed {e['all_consumed_s']:.2f} s after the "
          f"first; {e['bins']} bins (engine only: {o['bins']}), the model busy {100 * e['gpu_busy_fraction']:.0f}% "
          f"of the time; beyond the model's time (s): {e['overhead_s']}; the end (s): {e['end_s']}; "
          f"threads' CPU s: {e['threads_cpu_s']}; "
          f"digest passes: {e['digest']}")
    print(f"this process's CPU s: end to end {e['process_cpu_s']:.2f}, engine only {o['process_cpu_s']:.2f}")
    print(f"worker overhead: {r['worker_overhead_pct']:.1f}% of engine-only windows/s; wrote {out}")


def main(args, argv: Sequence[str] | None) -> int:
    result = run_capacity(args, argv)
    save(args.out, result)
    report(result, args.out)
    e = result["end_to_end"]
    return 0 if e["records_covered"] == result["producer"]["records"] and e["drained"] else 1
