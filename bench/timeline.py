"""The worker's timeline while a benchmark runs (sampled from its metrics), and what it says.

`sample_timeline` (a thread's target) appends a row every 20 ms: what was consumed, waits in the packer, ran on the
model, went out; `overhead_parts` splits the steady time beyond the model's own; `publication` says how
summaries followed the model; `model_counters` reads the run's totals. Used by `python -m bench.e2e` (bench/e2e.py) and bench/windows_capacity.py.
"""

from __future__ import annotations

import threading
import time


def sample_timeline(worker, out: list[dict], stop: threading.Event, every_s: float = 0.02) -> None:
    """A timeline of the pipeline: what was consumed, waits in the packer, ran on the model, went out.

    `work_s` is the model's work so far: finished bins' busy time plus the running bin's time so far."""
    # One collection of just these metrics per sample: get_sample_value collects the whole registry
    # (the process collector's /proc reads included) for each value, about 2.4 ms a sample of 9 on the
    # dev VM, taken from the worker's interpreter lock 50 times a second.
    view = worker.metrics.registry.restricted_registry([*FIELDS.values(), "ribbon_gpu_busy_seconds_total"])
    t0 = time.monotonic()
    while not stop.wait(every_s):
        since = worker.gpu.busy_since
        v = {s.name: s.value for m in view.collect() for s in m.samples}
        busy = v.get("ribbon_gpu_busy_seconds_total", 0)
        out.append({"t": round(time.monotonic() - t0, 3), **{k: v.get(name, 0) for k, name in FIELDS.items()},
                    "gpu_busy_s": round(busy, 3),
                    "work_s": round(busy + (time.monotonic() - since if since is not None else 0.0), 3)})


FIELDS = {"consumed": "ribbon_consumed_messages_total", "pending_tokens": "ribbon_pending_tokens",
             "inflight": "ribbon_inflight_messages", "paused": "ribbon_paused_partitions",
             "bins": "ribbon_bins_total", "model_documents": "ribbon_model_documents_total",
             "produced": "ribbon_produced_summaries_total"}  # timeline field -> metric sample


def model_counters(worker) -> dict:
    """The worker's totals at the end of a run: bins, the model's busy seconds, the digest passes' CPU
    seconds and the ingest thread's wait on them (its wall seconds)."""
    sample = worker.metrics.registry.get_sample_value
    return {"bins": int(sample("ribbon_bins_total") or 0),
            "busy_s": float(sample("ribbon_gpu_busy_seconds_total") or 0.0),
            "digest_s": float(sample("ribbon_digest_seconds_total") or 0.0),
            "digest_wall_s": float(sample("ribbon_digest_wall_seconds_total") or 0.0)}


def overhead_parts(timeline: list[dict], t_assigned: float, steady: float, busy: float, bins: int) -> dict:
    """Where the steady time beyond the model's own went, from the timeline (sampled every 20 ms):
    `to_first_fetch` (assignment to the first document consumed: the consumer's offset lookup),
    `to_first_bin` (from there to the first bin's start: the first full bin's ingest), `between_bins`
    (first bin's start to the last bin's hand-over, less the model's busy time: the engine waiting), and
    `tail` (the last bin's hand-over to the last summary read from the output topic). These four add up
    to the steady time less the model's.

    With continuous batching a bin is handed over while the model still works on earlier ones, so the
    tail holds model time; it is split at the model's last document back (the first sample where the
    model's documents, else its work, reach their totals): `tail_model` (the last hand-over to then) and
    `after_model` (then to the last summary read: finishing, the transaction, the reader). `model_idle`:
    the first bin's start to the model's last document, less the model's busy time."""
    def first(pred) -> float | None:
        return next((x["t"] - t_assigned for x in timeline if pred(x)), None)

    fetch = first(lambda x: x["consumed"] > 0)
    start = first(lambda x: x["work_s"] > 0)
    end = first(lambda x: x["bins"] >= bins) if bins else None
    if None in (fetch, start, end):
        return {}
    docs = timeline[-1].get("model_documents", 0)
    work = timeline[-1]["work_s"]
    done = first(lambda x: x.get("model_documents", 0) >= docs) if docs else first(lambda x: x["work_s"] >= work)
    done = max(end, done if done is not None else end)
    return {"to_first_fetch": round(fetch, 3), "to_first_bin": round(start - fetch, 3),
            "between_bins": round(max(0.0, end - start - busy), 3), "tail": round(steady - end, 3),
            "tail_model": round(done - end, 3), "after_model": round(steady - done, 3),
            "model_idle": round(max(0.0, done - start - busy), 3)}


def end_parts(timeline: list[dict], t_assigned: float, steady: float, records: int) -> dict:
    """The run's end and ingest's pauses, from the timeline (sampled every 20 ms), for a backlog whose
    outputs commit only at its end (windows: a partition's commit point waits for its last window):
    `model_to_committed` (the model's last document back to the last output committed: finishing and
    delivery), `committed_to_read` (then to the last output read by the reader), and `paused_s` (samples
    with a paused partition before every record was consumed: ingest held back by backpressure)."""
    if not timeline:
        return {}
    last = timeline[-1]
    docs, produced = last.get("model_documents", 0), last.get("produced", 0)
    done = next((x["t"] for x in timeline if docs and x.get("model_documents", 0) >= docs), None)
    out = next((x["t"] for x in timeline if produced and x.get("produced", 0) >= produced), None)
    paused, prev = 0.0, None
    for x in timeline:
        if prev is not None and prev.get("paused", 0) > 0 and prev["consumed"] < records:
            paused += x["t"] - prev["t"]
        prev = x
    parts = {"paused_s": round(paused, 3)}
    if done is not None and out is not None:
        parts |= {"model_to_committed": round(max(0.0, out - done), 3),
                  "committed_to_read": round(max(0.0, t_assigned + steady - max(out, done)), 3)}
    return parts


def publication(timeline: list[dict], n: int, at: float = 0.8) -> dict:
    """How summaries followed the model: shares published when `at` of the model's work was done.

    `published`: summaries on the output topic (committed) at the first sample where the work
    reached `at` of its total; `model_finished`: documents whose bin had finished by then (the
    most that could be published: a bin's documents finish together); `lag_s`: per bin, the time
    from the model finishing its documents to their being published (the pipeline's own delay)."""
    if not timeline or not n:
        return {}
    total = timeline[-1]["gpu_busy_s"]
    hit = next((x for x in timeline if x["work_s"] >= at * total), timeline[-1])
    lags, j = [], 0
    for x in timeline:  # each rise of model_documents: when did produced catch up with it?
        if x["model_documents"] > (timeline[j - 1]["model_documents"] if j else 0):
            target = x["model_documents"]
            caught = next((y["t"] for y in timeline if y["t"] >= x["t"] and y["produced"] >= target), None)
            if caught is not None:
                lags.append(round(caught - x["t"], 3))
        j += 1
    # Counted in finished bins instead: the bin whose end takes the finished work past `at`, and the
    # share published once its documents are out (a bin's documents finish together).
    cross = next((x for x in timeline if x["gpu_busy_s"] >= at * total), timeline[-1])
    out = next((y for y in timeline if y["t"] >= cross["t"] and y["produced"] >= cross["model_documents"]),
               timeline[-1])
    return {"at_work": at, "published": hit["produced"] / n, "model_finished": hit["model_documents"] / n,
            "t": hit["t"], "bin_publication_lag_s": lags,
            "crossing_bin": {"work": cross["gpu_busy_s"] / total, "published": out["produced"] / n,
                             "after_s": round(out["t"] - cross["t"], 3)}}
