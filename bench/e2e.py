"""`python -m bench.e2e`: documents/s from input topic to output topic, against the engine alone.

Side by side in one process, on the same documents, the same engine instance
(already warm) and the same token budget:
  engine only: the documents pre-tokenized and pre-packed, bins fed straight to the engine;
  end to end:  the documents on the embedded broker's input topic; the full worker (consume,
               decode, validate, tokenize, pack, generate, produce + commit in transactions)
               until every summary is readable (read_committed) on the output topic.
The worker's own cost is 1 - e2e/engine, per pair (each end-to-end run follows an engine-only run
of its own; `--runs` pairs, the median reported). Group-join time is reported apart (it is start-up,
not throughput): "steady" figures run from the first assignment.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import torch

from worker.config.settings import ModelRun
from bench.loadgen import OutputReader, OutputTopic
from bench.parts import load_parts
from bench.results_io import command_line
from bench.steady import report, steady_load
from bench.timeline import model_counters, overhead_parts, publication, sample_timeline
from worker.demo.samples import corpus, mixed_corpus, quality_corpus
from worker.digest.prepared import PrepareOptions, prepare_many
from worker.digest.prompt import DocumentText, token_gate
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import embedded_settings, plain_config
from worker.pipeline.app import Parts, Worker, make_packer, packer_device
from worker.pipeline.planner import PlanLimits, Planner

CORPORA = {
    "short": lambda n: corpus(n, seed=11),                       # 3-80 lines each
    "mixed": lambda n: mixed_corpus(n, seed=11),                 # short, every tenth a long repetitive log
    "quality": lambda n: [s.message for s in quality_corpus(max(1, n // 6), seed=11, lengths=(200, 1_000))][:n],
}


def planned(settings, parts, docs: list[dict]) -> tuple[list[str], float, Planner]:
    """The documents' model texts (digest pass and token gate, as the worker), the digest's seconds,
    and the worker's planner over the engine's prompt framing and tokenizer."""
    eng = parts.engine

    def count(xs) -> list[int]:
        return [len(x) for x in eng.tokenizer(list(xs), add_special_tokens=False, split_special_tokens=True)["input_ids"]]

    texts, digest_s = model_texts(settings, docs, count)
    planner = Planner(eng.prompt_ids, count, PlanLimits(parts.budget - parts.reserve, max_new_tokens=parts.reserve),
                      prompt_batch=eng.prompt_ids_batch)
    return texts, digest_s, planner


def model_texts(settings, docs: list[dict], count) -> tuple[list[str], float]:
    """What the worker gives the model for each document (compacted or raw), and the digest seconds."""
    raws = ["\n".join(d["lines"]) for d in docs]
    o = PrepareOptions(highlights=settings.digest.highlights, compaction=settings.digest.compaction,
                       min_saving=settings.digest.min_saving, render=False)
    t0 = time.perf_counter()
    preps = prepare_many(raws, [d.get("source") for d in docs], [d.get("kind") for d in docs], o)
    if not settings.digest.compaction:
        return raws, time.perf_counter() - t0
    chosen = [DocumentText(p.prompt, True, 0, 0) if p.prompt is not None else DocumentText(r, False, 0, 0)
              for p, r in zip(preps, raws)]
    texts = [t.text for t in token_gate(raws, chosen, min_saving=settings.digest.min_saving, count=count)]
    return texts, time.perf_counter() - t0


def pack_bins(packer, prompts: list[list[int]]) -> list[tuple]:
    """The prompts through the real packer: bins as (tokens, cu_seqlens, max_seqlen, prompt indices,
    tokens in the bin), the arrays copied out of the packer's slots."""
    for i, ids in enumerate(prompts):
        packer.submit(i, np.asarray(ids, dtype=np.int32), 0)
    bins, n = [], 0
    while n < len(prompts):
        b = packer.next_bin(1.0)
        if b is None:
            continue
        bins.append((np.array(b.tokens), np.array(b.cu_seqlens), int(b.max_seqlen), [int(s) for s in b.seq_ids],
                     int(b.num_tokens)))
        n += len(b.seq_ids)
        packer.release(b.slot)
    return bins


def engine_only(parts, prompts: list[list[int]], seeds: list[int], n_docs: int | None = None,
                continuous: bool | None = None, timeout_s: float = 3_600.0) -> dict:
    """Pack with the real packer (not timed), then time the engine over the bins (n_docs: documents the
    prompts come from, when some are chunks); continuous: through the continuous batcher (None: as the
    engine batches, batching.mode). An engine process batches as its own settings say (either way
    through the worker's protocol); `timeout_s` bounds the wait for its results."""
    p = parts.packer
    bins = [(torch.from_numpy(t), torch.from_numpy(c), mx, ids, nt) for t, c, mx, ids, nt in pack_bins(p, prompts)]
    eng = parts.engine
    if continuous is None:
        continuous = getattr(getattr(eng, "options", None), "batching", "bin") == "continuous"
    if hasattr(eng, "send_bin"):  # the engine in its own process: through its protocol, as the worker runs it
        wall, out_tokens = _time_there(eng, bins, seeds, timeout_s)
    elif continuous:
        _, wall, out_tokens = _time_continuous(eng, eng.batcher(p.config.max_seqs, p.config.budget),
                                              [(t.numpy(), c.numpy(), mx, [seeds[i] for i in ids])
                                               for t, c, mx, ids, _ in bins])
    else:
        wall, out_tokens = _time_here(eng, bins, seeds)
    in_tokens = sum(b[4] for b in bins)
    return {"wall_s": wall, "docs_per_s": (n_docs or len(prompts)) / wall, "input_tokens_per_s": in_tokens / wall,
            "output_tokens_per_s": out_tokens / wall, "bins": len(bins), "output_tokens": out_tokens,
            "input_tokens": in_tokens}


def _time_there(eng, bins: list, seeds: list[int], timeout_s: float) -> tuple[float, int]:
    """The engine process alone, a bin at a time or batching continuously: one warm-up bin, then every
    bin queued back to back. Results come per bin ("done") or per document ("docs", continuous); the
    wall time runs from the first bin's start there (a bin at a time) or from sending the first bin
    (continuous), to the last result's end there."""
    def run(batch: list) -> tuple[float, list]:
        want, start = 0, time.monotonic()
        for t, c, mx, s, _ in batch:
            eng.send_bin(t.numpy(), c.numpy(), mx, [seeds[i] for i in s], [True] * len(s))
            want += len(s)
        outs, spans = [], []
        deadline = time.monotonic() + timeout_s
        while len(outs) < want and time.monotonic() < deadline:
            msg = eng.receive(0.5)
            if msg is None or msg[0] not in ("done", "docs"):
                continue
            if msg[0] == "done":  # ("done", bin_id, outputs, t0, t1, ...)
                outs += msg[2]
                spans.append((msg[3], msg[4]))
            else:  # ("docs", [(bin_id, index, output)], t0, t1, ...)
                outs += [o for _, _, o in msg[1]]
                spans.append((start, msg[3]))
        if len(outs) < want:
            raise RuntimeError(f"the engine process finished {len(outs)} of {want} documents in {timeout_s:.0f} s")
        return max(e for _, e in spans) - min(s for s, _ in spans), outs

    run(bins[:1])  # warm-up (CUDA graphs, allocator)
    wall, outs = run(bins)
    return wall, sum(len(o.token_ids) for o in outs if o is not None and not isinstance(o, BaseException))


def _time_continuous(engine, batcher, bins: list) -> tuple:
    """The engine in this process, batching continuously: bins (tokens, cu, max_seqlen, seeds) through
    its batcher, taken as it wants work: ("timed", wall_s, output_tokens)."""
    cuda = engine.device.type == "cuda"
    prep = [(torch.from_numpy(t).pin_memory() if cuda else torch.from_numpy(t), cu, mx, s) for t, cu, mx, s in bins]
    sync = (lambda: torch.cuda.synchronize(engine.device)) if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    out_tokens, nxt = 0, 0
    while nxt < len(prep) or batcher.busy:
        while nxt < len(prep) and (not batcher.busy or batcher.wants_work()):
            tokens, cu, mx, seeds = prep[nxt]
            batcher.add(engine.stage(tokens, cu, mx), list(seeds), list(range(len(cu) - 1)), engine.limits(list(seeds)))
            nxt += 1
        out_tokens += sum(len(g.token_ids) for _, g, _ in batcher.step().done)
    sync()
    return ("timed", time.perf_counter() - t0, out_tokens)


def _time_here(eng, bins: list, seeds: list[int]) -> tuple[float, int]:
    warm = eng.stage(*bins[0][:3])
    eng.generate(warm, [seeds[i] for i in bins[0][3]])  # warm-up (CUDA graphs, allocator)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t0 = time.perf_counter()
    out_tokens = 0
    for tok, cu, mx, ids, _ in bins:
        outs = eng.generate(eng.stage(tok.pin_memory() if tok.device.type == "cpu" and torch.cuda.is_available()
                                      else tok, cu, mx), [seeds[i] for i in ids])
        out_tokens += sum(len(o.token_ids) for o in outs)
    sync()
    return time.perf_counter() - t0, out_tokens


def end_to_end(settings, parts, docs: list[dict], timeout_s: float) -> dict:
    k = settings.kafka
    with EmbeddedBroker() as broker:
        broker.create_topics({k.input_topics[0]: 8, k.output_topic: 8, k.dlq_topic: 1})
        conf = plain_config(broker.bootstrap)
        prod = clients.producer(conf.tool_producer())
        for i, d in enumerate(docs):
            prod.produce(k.input_topics[0], value=orjson.dumps(d), key=str(i).encode())
            prod.poll(0)
        prod.flush(60)
        s = embedded_settings(settings, broker.bootstrap)
        packer = make_packer(s, parts.budget, parts.reserve, packer_device(parts.engine))
        worker = Worker(s, broker.bootstrap, parts=Parts(parts.engine, packer, parts.budget, parts.reserve))
        # The reader takes its partitions by assign(), not by joining a group: a group join on the
        # embedded broker blocks about half of session.timeout.ms, which would be timed as throughput.
        # It runs in a process of its own (bench/loadgen.py), as a user's reader does.
        reader = OutputReader(OutputTopic(broker.bootstrap, k.output_topic, 8), len(docs), timeout_s)
        timeline: list[dict] = []
        stop_sampling = threading.Event()
        sampler = threading.Thread(target=sample_timeline, args=(worker, timeline, stop_sampling), daemon=True)
        t0 = time.monotonic()
        sampler.start()
        worker.start()
        worker.ingest.assigned.wait(60)
        t_assigned = time.monotonic()
        read = reader.result()
        got = len(read)
        out_tokens = sum(v[2]["output"] for v in read.values())
        in_tokens = sum(v[2]["input"] for v in read.values())
        t1 = max((v[0] for v in read.values()), default=time.monotonic())
        stop_sampling.set()
        sampler.join(5)
        sample = worker.metrics.registry.get_sample_value
        c = model_counters(worker)
        bins, busy, digest_s, digest_wall_s = c["bins"], c["busy_s"], c["digest_s"], c["digest_wall_s"]
        processes = worker.ingest.preprocess.processes
        doc_tokens = int(sample("ribbon_document_tokens_total") or 0)
        compacted = int(sample("ribbon_compacted_documents_total") or 0)
        worker.drain(30)
        worker.close()
    steady = t1 - t_assigned
    return {"wall_s": t1 - t0, "group_join_s": t_assigned - t0, "steady_s": steady, "summaries": got, "bins": bins,
            "gpu_busy_s": busy, "gpu_busy_fraction": busy / steady, "timeline": timeline,
            "publication": publication(timeline, len(docs)),
            "overhead_s": overhead_parts(timeline, t_assigned - t0, steady, busy, bins),
            "digest_s": digest_s, "digest_share_of_engine_busy": digest_s / busy if busy else None,
            "digest_wall_s": digest_wall_s, "digest_wall_share_of_engine_busy": digest_wall_s / busy if busy else None,
            "preprocess_processes": processes,
            "document_tokens": doc_tokens, "compacted_documents": compacted,
            "docs_per_s": got / steady, "input_tokens_per_s": in_tokens / steady,
            "output_tokens_per_s": out_tokens / steady, "input_tokens": in_tokens, "output_tokens": out_tokens}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-random", help="model path (default: the tiny random model)")
    ap.add_argument("--arch-config", help="random weights of this architecture config instead, e.g. "
                                          "config/models/qwen2.5-0.5b.json")
    ap.add_argument("--documents", type=int, default=1000)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--token-budget", default="auto")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="short",
                    help="short: 3-80 lines each; mixed: every tenth a long repetitive log; quality: long logs only")
    ap.add_argument("--process", choices=["auto", "on", "off"], default="auto",
                    help="engine.process: the model in its own process (auto: on CUDA)")
    ap.add_argument("--compaction", choices=["on", "off"], default="on", help="digest.compaction")
    ap.add_argument("--preprocess-processes", type=int, default=None,
                    help="pipeline.preprocess_processes (default: auto, 0 below 8 cores)")
    ap.add_argument("--runs", type=int, default=1, help="end-to-end runs over the same documents (default 1)")
    ap.add_argument("--steady", default="", help="then steady-load runs at these fractions of the measured "
                                                 "end-to-end capacity, e.g. 0.5,0.9")
    ap.add_argument("--steady-seconds", type=float, default=60.0, help="length of each steady-load run")
    ap.add_argument("--steady-partitions", type=int, default=8, help="topic partitions of the steady-load runs")
    ap.add_argument("--batching", choices=["bin", "continuous"], default=None,
                    help="batching.mode (default: the setting's, continuous)")
    ap.add_argument("--prefill-step-tokens", type=int, default=None, help="prompt tokens prefilled per step (continuous; default 131072)")
    ap.add_argument("--refill-fraction", type=float, default=None, help="free seats before waiting documents join (continuous; default 0.25)")
    ap.add_argument("--stop-lengths", default=None,
                    help="documents stop after lengths drawn from this file "
                         "(random weights never stop by themselves), e.g. bench/results/stop_lengths_cpu.json")
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/e2e_<device>.json)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings, parts, cleanup = load_parts(a)
    eng = parts.engine
    docs = CORPORA[a.corpus](a.documents)

    texts, digest_s, planner = planned(settings, parts, docs)
    t0 = time.perf_counter()
    # a long document goes in chunks, as in the worker (engine only leaves out the combine round)
    prompts = [list(p) for plan in planner.plan_many(texts) for p in plan.prompts]
    tok_s = time.perf_counter() - t0
    seeds = list(range(len(prompts)))
    # Each end-to-end run follows an engine-only run of its own: the overhead is a pair's ratio, so a
    # slow or fast stretch of the device (run to run the engine alone varies by a few %) is in both.
    onlys, runs = [], []
    device = (getattr(eng, "device_name", None) or torch.cuda.get_device_name()) if eng.device.type == "cuda" \
        else platform.processor() or "cpu"
    out = Path(a.out or f"bench/results/e2e_{'h200' if eng.device.type == 'cuda' else 'cpu'}_{a.corpus}_"
                        f"compaction_{a.compaction}.json")
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(only_bins=None, steady=None, complete=True) -> dict:
        """The result so far, written to `out` (after every pair too: a run stopped at its time limit keeps
        the pairs it finished, `complete` false)."""
        overheads = [100.0 * (1.0 - r["docs_per_s"] / o["docs_per_s"]) for r, o in zip(runs, onlys)]
        mid = int(np.argsort(overheads)[len(runs) // 2])  # the median pair
        result = {
            "device": device, "torch": torch.__version__, "model": a.arch_config or a.model, "backend": eng.backend,
            "documents": len(docs), "corpus": a.corpus, "compaction": a.compaction, "prompts": len(prompts),
            "digest_docs_per_s": len(docs) / digest_s,
            "max_new_tokens": a.max_new_tokens, "token_budget": parts.budget,
            "packer_order": settings.batching.order, "engine_process": hasattr(eng, "send_bin"),
            "prompt_tokens": sum(map(len, prompts)), "tokenize_docs_per_s": len(docs) / tok_s,
            "batching": settings.batching.mode, "stop_lengths": a.stop_lengths,
            "prefill_step_tokens": a.prefill_step_tokens or ModelRun().prefill_step_tokens,
            "refill_fraction": ModelRun().refill_fraction if a.refill_fraction is None else a.refill_fraction,
            "engine_only": onlys[mid], "engine_only_runs": onlys, "engine_only_bin_at_a_time": only_bins,
            "end_to_end": runs[mid], "runs": runs,
            "worker_overhead_pct": float(np.median(overheads)), "worker_overhead_pct_runs": overheads,
            "published_at_80pct_work_runs": [r["publication"].get("published") for r in runs],
            "steady_load": steady or {}, "capacity_docs_per_s": float(np.median([r["docs_per_s"] for r in runs])),
            "complete": complete, "command": command_line("bench.e2e", argv),
        }
        out.write_text(json.dumps(result, separators=(",", ":")))  # compact: the timelines are long
        return result

    print(f"ready: budget {parts.budget}, {len(prompts)} prompts; digests {digest_s:.1f} s, tokenized in {tok_s:.1f} s",
          flush=True)   # progress as it goes: a run stopped at its limit shows how far it got
    for i in range(max(1, a.runs)):
        onlys.append(engine_only(parts, prompts, seeds, len(docs), continuous=settings.batching.mode == "continuous"))
        runs.append(end_to_end(settings, parts, docs, a.timeout))
        print(f"pair {i + 1}: engine only {onlys[-1]['docs_per_s']:.1f} docs/s, end to end {runs[-1]['docs_per_s']:.1f}",
              flush=True)
        write(complete=False)
    # the other batching mode over the same bins, same engine (benchmarks compare them side by side)
    only_bins = (engine_only(parts, prompts, seeds, len(docs), continuous=False)
                 if settings.batching.mode == "continuous" and not hasattr(eng, "send_bin") else None)  # in this process only
    capacity = float(np.median([r["docs_per_s"] for r in runs]))
    fractions = [float(f) for f in a.steady.split(",") if f.strip()]
    steady = {f"{f:g}": steady_load(settings, parts, f * capacity, a.steady_seconds, partitions=a.steady_partitions)
              for f in fractions}
    cleanup()
    result = write(only_bins, steady)
    overheads = result["worker_overhead_pct_runs"]
    print(f"{'':14}{'docs/s':>10}{'in tok/s':>12}{'out tok/s':>12}{'wall s':>9}")
    also = (("engine, bins", only_bins),) if only_bins else ()
    pairs = [(f"{name} {i + 1}", r) for i, (o, e) in enumerate(zip(onlys, runs))
             for name, r in (("engine only", o), ("end to end", e))]
    for name, r in (*pairs, *also):
        print(f"{name:14}{r['docs_per_s']:10.1f}{r['input_tokens_per_s']:12.0f}{r['output_tokens_per_s']:12.0f}"
              f"{r.get('steady_s', r['wall_s']):9.2f}")
    for i, r in enumerate(runs):
        pub = r["publication"]
        print(f"run {i + 1}: {r['bins']} bins (engine only: {onlys[i]['bins']}); the model ran "
              f"{100 * r['gpu_busy_fraction']:.0f}% of the steady time; at 80% of the model's work "
              f"{100 * pub.get('published', 0):.1f}% published ({100 * pub.get('model_finished', 0):.1f}% finished "
              f"by the model; {100 * pub['crossing_bin']['published']:.1f}% {pub['crossing_bin']['after_s']:.2f} s "
              f"after the bin that took the work past 80%); overhead {overheads[i]:.1f}%; digests {r['digest_s']:.2f} CPU s "
              f"({100 * (r['digest_share_of_engine_busy'] or 0):.1f}% of engine busy time), ingest thread on them "
              f"{r['digest_wall_s']:.2f} s ({100 * (r['digest_wall_share_of_engine_busy'] or 0):.1f}%, "
              f"{r['preprocess_processes']} preprocess processes), "
              f"{r['compacted_documents']} documents compacted, {r['document_tokens']:,} document tokens")
        if r.get("overhead_s"):
            print("  beyond the model's time (s): " + ", ".join(f"{k.replace('_', ' ')} {v:.3f}"
                                                               for k, v in r["overhead_s"].items()))
    for label, r in steady.items():
        report(r, f"steady {label} of capacity")
    print(f"worker overhead (median of {len(runs)} pairs): {result['worker_overhead_pct']:.1f}% of engine-only docs/s "
          f"(group join excluded); tokenize {result['tokenize_docs_per_s']:.0f} docs/s; wrote {out}")
    ok = all(r["summaries"] == len(docs) for r in runs) and all(r["summaries"] == r["documents"]
                                                                 for r in steady.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
