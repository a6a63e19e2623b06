"""`python -m bench.steady`: time from produce to summary visible under a steady load.

Documents are produced at a constant rate (a fraction of the measured capacity)
for a fixed time onto the embedded broker's input topic; the full worker
summarizes them; a read_committed reader notes when each summary becomes
visible on the output topic (producer and reader run in a process of their own,
bench/loadgen.py, as a user's would). Figures: p50/p99/mean latency (produce call to
visible), against the mean bin time (model seconds per bin) over the same run.
The first `warmup_s` seconds are left out of the percentiles (the group join
and the first bins); they are reported apart.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from bench.loadgen import SteadyLoad, Topics
from bench.parts import load_parts
from bench.results_io import command_line
from worker.demo.samples import corpus
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import embedded_settings
from worker.pipeline.app import Parts, Worker, make_packer, packer_device


def steady_load(settings, parts, rate: float, seconds: float, warmup_s: float = 5.0,
                partitions: int = 8, timeout_s: float = 120.0) -> dict:
    """One steady-load run at `rate` documents/s for `seconds` (see the module doc)."""
    k = settings.kafka
    n = max(1, int(rate * seconds))
    docs = [{**d, "id": f"s{i}"} for i, d in enumerate(corpus(n, seed=23))]
    with EmbeddedBroker() as broker:
        broker.create_topics({k.input_topics[0]: partitions, k.output_topic: partitions, k.dlq_topic: 1})
        s = embedded_settings(settings, broker.bootstrap)
        packer = make_packer(s, parts.budget, parts.reserve, packer_device(parts.engine))
        worker = Worker(s, broker.bootstrap, parts=Parts(parts.engine, packer, parts.budget, parts.reserve))
        # producer and reader in a process of their own (bench/loadgen.py), as a user's are
        load = SteadyLoad(Topics(broker.bootstrap, k.input_topics[0], k.output_topic, partitions), docs, rate, timeout_s)
        worker.start()
        worker.ingest.assigned.wait(60)
        get = worker.metrics.registry.get_sample_value
        t_start = load.start()
        sent, read = load.result()
        bins, busy = get("ribbon_bins_total") or 0, get("ribbon_gpu_busy_seconds_total") or 0.0
        ready_n = get("ribbon_end_to_end_latency_seconds_count") or 0
        inside = {"poll_to_ready_mean_s": (get("ribbon_end_to_end_latency_seconds_sum") or 0.0) / max(1, ready_n),
                  "transactions": int(get("ribbon_transaction_commits_total") or 0), **_inside(worker)}
        worker.drain(30)
        worker.close()
    seen = {i: v[0] for i, v in read.items()}
    timing = {i: v[1] for i, v in read.items()}
    lat = np.array([seen[i] - sent[i] for i in sent if i in seen and sent[i] - t_start >= warmup_s])
    warm = np.array([seen[i] - sent[i] for i in sent if i in seen and sent[i] - t_start < warmup_s])
    inner = np.array([timing[i]["total"] / 1e3 for i in sent
                      if i in seen and timing.get(i) and sent[i] - t_start >= warmup_s])
    mean_bin = busy / bins if bins else float("nan")
    pct = (lambda a, q: float(np.percentile(a, q)) if len(a) else float("nan"))  # noqa: E731
    return {"rate_docs_per_s": rate, "seconds": seconds, "partitions": partitions, "documents": n,
            "summaries": len(seen),
            "warmup_s": warmup_s, "bins": int(bins), "gpu_busy_s": busy, "mean_bin_s": mean_bin,
            "latency_s": {"p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99),
                          "mean": float(lat.mean()) if len(lat) else float("nan"), "max": pct(lat, 100),
                          "n": int(len(lat))},
            "warmup_latency_p99_s": pct(warm, 99), "worker": inside,
            "stages_s": stage_times([(seen[i] - sent[i], timing[i]) for i in sent
                                 if i in seen and i in timing and sent[i] - t_start >= warmup_s], pct),
            "windows": windows([(sent[i] - t_start, seen[i] - sent[i], timing.get(i)) for i in sent if i in seen], pct),
            "p99_over_mean_bin": pct(lat, 99) / mean_bin if bins else float("nan"),
            **_over_model_time(lat, timing, sent, seen, t_start, warmup_s, pct),
            **worker_share(inner, mean_bin, pct)}


def _over_model_time(lat, timing: dict, sent: dict, seen: dict, t_start: float, warmup_s: float, pct) -> dict:
    """p99 latency over the mean per-document model time (the model taking the document to its
    result: its bin, or with continuous batching its own prefill and decode), from timing_ms."""
    model = [(timing[i]["model_done"] - timing[i]["queued"]) / 1e3 for i in sent
             if i in seen and timing.get(i) and timing[i].get("model_done") and sent[i] - t_start >= warmup_s]
    if not model or not len(lat):
        return {}
    mean = float(np.mean(model))
    return {"mean_doc_model_s": round(mean, 4), "p99_over_mean_doc_model": round(pct(lat, 99) / mean, 3)}


def worker_share(inner: np.ndarray, mean_bin: float, pct) -> dict:
    """The worker's own part of each latency (its poll to the output finished, from timing_ms.total):
    without the broker's produce and fetch waits or delivery's transaction, which an embedded test
    broker may stretch (bench/broker_drift.py)."""
    if not len(inner):
        return {}
    return {"worker_latency_s": {"p50": pct(inner, 50), "p99": pct(inner, 99)},
            "worker_p99_over_mean_bin": pct(inner, 99) / mean_bin}  # nan when no bin ran


def windows(rows: list[tuple], pct, width_s: float = 10.0) -> list[dict]:
    """Latency p50/p99 of the documents produced in each `width_s` of the run (by produce time): does
    the run hold its latency, or drift as it goes on? Rows are (produce time, latency[, timing_ms]);
    with the outputs' timing, each window also has its stages' p50 (`stages_p50_s`: stage_times), so a
    drift shows where it grows."""
    by: dict[int, list[tuple]] = {}
    for row in rows:
        by.setdefault(int(row[0] // width_s), []).append(row)
    out = []
    for k, v in sorted(by.items()):
        lat = np.array([r[1] for r in v])
        w = {"from_s": k * width_s, "n": len(v), "p50": round(pct(lat, 50), 4), "p99": round(pct(lat, 99), 4)}
        timed = [(r[1], r[2]) for r in v if len(r) > 2 and r[2]]
        if timed:
            w["stages_p50_s"] = {name: q["p50"] for name, q in stage_times(timed, pct).items()}
        out.append(w)
    return out


def _mean(get, name: str) -> float | None:
    n = get(f"{name}_count") or 0
    return round((get(f"{name}_sum") or 0.0) / n, 4) if n else None


def _inside(worker) -> dict:
    """The worker's own figures over the run: a record's mean age at poll (the wait in the broker and
    the fetch), delivery's mean step (transaction), and the garbage collector's pauses."""
    get = worker.metrics.registry.get_sample_value
    gc_n = sum(get("ribbon_gc_pause_seconds_count", {"generation": g}) or 0 for g in "012")
    gc_s = sum(get("ribbon_gc_pause_seconds_sum", {"generation": g}) or 0.0 for g in "012")
    return {"record_age_at_poll_mean_s": _mean(get, "ribbon_record_age_seconds"),
            "delivery_step_mean_s": _mean(get, "ribbon_delivery_step_seconds"),
            "gc_pauses": int(gc_n), "gc_pause_total_s": round(gc_s, 4),
            "gc_pause_longest_s": round(worker.gc.longest_s, 4),
            "gc_full_collections": int(get("ribbon_gc_pause_seconds_count", {"generation": "2"}) or 0)}


def stage_times(rows: list[tuple[float, dict]], pct) -> dict:
    """Where each document's latency went, from its output's timing_ms (the worker's clock) and the
    bench's produce and visible times: outside the worker (produce to poll, plus finishing to visible
    on the output topic: the broker's fetch, delivery's transaction, the reader), poll to the model's
    start of its bin (ingest, packer window, the bin ahead), and the model's start to finishing (the
    bin itself, then finishing). Where the outputs say (timing_ms.ingest and .model_done), these two
    are split further: ingest (poll to the packer), packer_to_model (waiting for a bin: the packer
    and the bin ahead), bin (its bin on the model), after_model (results back, finishing).
    p50 and p99 of each, in seconds."""
    if not rows:
        return {}
    parts = {"outside_worker": [lat - t["total"] / 1e3 for lat, t in rows],
             "poll_to_model": [t["queued"] / 1e3 for _, t in rows],
             "model_to_finished": [(t["total"] - t["queued"]) / 1e3 for _, t in rows]}
    if all(t.get("model_done") for _, t in rows):
        parts.update({"ingest": [t["ingest"] / 1e3 for _, t in rows],
                      "packer_to_model": [(t["queued"] - t["ingest"]) / 1e3 for _, t in rows],
                      "bin": [(t["model_done"] - t["queued"]) / 1e3 for _, t in rows],
                      "after_model": [(t["total"] - t["model_done"]) / 1e3 for _, t in rows]})
    return {k: {"p50": round(pct(np.array(v), 50), 4), "p99": round(pct(np.array(v), 99), 4),
                "mean": round(float(np.mean(v)), 4)} for k, v in parts.items()}


def report(r: dict, label: str) -> None:
    lat = r["latency_s"]
    print(f"{label}: {r['rate_docs_per_s']:.1f} docs/s for {r['seconds']:.0f} s, {r['summaries']}/{r['documents']} "
          f"summaries; latency p50 {lat['p50']:.3f} s, p99 {lat['p99']:.3f} s; mean bin {r['mean_bin_s']:.3f} s "
          f"({r['bins']} bins); p99 = {r['p99_over_mean_bin']:.2f}x the mean bin time")
    if r.get("mean_doc_model_s"):
        print(f"  mean per-document model time {r['mean_doc_model_s']:.3f} s; p99 = {r['p99_over_mean_doc_model']:.2f}x it")
    if r.get("worker_latency_s"):
        w = r["worker_latency_s"]
        print(f"  the worker's own part (poll to output finished): p50 {w['p50']:.3f} s, p99 {w['p99']:.3f} s "
              f"= {r['worker_p99_over_mean_bin']:.2f}x the mean bin time")
    if r.get("stages_s"):
        print("  where it went (p50/p99 s): " + ", ".join(f"{k.replace('_', ' ')} {v['p50']:.3f}/{v['p99']:.3f}"
                                                         for k, v in r["stages_s"].items()))
    if r.get("windows"):
        print("  p99 by 10 s of produce time: " + ", ".join(f"{w['p99']:.3f}" for w in r["windows"]))
        for name in r["windows"][0].get("stages_p50_s", {}):
            print(f"    {name.replace('_', ' ')} p50 by 10 s: "
                  + ", ".join(f"{w.get('stages_p50_s', {}).get(name, float('nan')):.3f}" for w in r["windows"]))
    w = r.get("worker", {})
    if "gc_pauses" in w:
        print(f"  worker: record age at poll {w['record_age_at_poll_mean_s']} s, delivery step "
              f"{w['delivery_step_mean_s']} s (means); {w['gc_pauses']} GC pauses, {w['gc_pause_total_s']} s in all, "
              f"longest {w['gc_pause_longest_s']} s ({w['gc_full_collections']} full)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.steady", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-random", help="model path (default: the tiny random model)")
    ap.add_argument("--arch-config", help="random weights of this architecture config instead")
    ap.add_argument("--rate", type=float, required=True, help="documents per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--token-budget", default="auto")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--process", choices=["auto", "on", "off"], default="auto",
                    help="model.process (auto: the model in its own process on CUDA)")
    ap.add_argument("--partitions", type=int, default=8,
                    help="input and output topic partitions (the embedded broker's per-partition log length "
                         "grows its latency: bench/broker_drift.py)")
    ap.add_argument("--out", default=None, help="JSON path (default: print only)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings, parts, cleanup = load_parts(a)
    try:
        r = steady_load(settings, parts, a.rate, a.seconds, partitions=a.partitions)
    finally:
        cleanup()
    r["command"] = command_line("bench.steady", argv)
    report(r, "steady")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(r, separators=(",", ":")))  # compact: the timelines are long
    return 0 if r["summaries"] == r["documents"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
