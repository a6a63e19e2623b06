"""Continuous batching's scheduler settings against a bin at a time, the engine alone, over the same bins.

The 0.5B architecture with random weights (or any --arch-config) on the `short` corpus, each document
stopping after a length drawn from a measured distribution (--stop-lengths: SmolLM2's output lengths;
random weights never stop by themselves). The prompts are the worker's (digest compaction on), packed
by the real packer once; then, in one process and on one warm engine:
  bin:         every bin through Engine.generate (documents handed back when their bin ends);
  continuous:  each setting (prefill_step_tokens:refill_fraction:lag[:check_every]) through a ContinuousBatcher,
               bins added as it wants work (documents handed back as they finish).
Per run: docs/s, the share of documents handed back when 80% of the run's time had passed (the engine
alone is busy all the time, so time is its work), decode steps and mean rows per decode step.

Also the publication ceiling: with each document's cost = its prompt tokens x (prefill s per token)
+ its output tokens x (decode s per output token), both measured in the bin run, the share of
documents whose cost fits in the first 80% of the total when they run one after another in a given
order (FIFO, shortest prompt first, and shortest cost first knowing every stop length in advance).
Running documents side by side only lowers it (a document in flight holds work but is not finished).

    python -m bench.continuous_sweep --arch-config config/models/qwen2.5-0.5b.json \\
        --stop-lengths bench/results/stop_lengths_cpu.json --settings 16384:0:0,16384:0:1,65536:0.25:1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path

import torch

from bench.e2e import CORPORA, pack_bins, planned
from bench.parts import load_parts


def pack(parts, prompts: list[list[int]]) -> list[tuple]:
    """The prompts through the real packer: bins as (tokens, cu_seqlens, max_seqlen, prompt indices)."""
    return [b[:4] for b in pack_bins(parts.packer, prompts)]


def _at(marks: list[tuple[float, int]], wall: float, n: int, share: float = 0.8) -> float:
    """Share of the n documents handed back by `share` of the wall time; marks: (time, docs so far)."""
    return max((d for t, d in marks if t <= share * wall), default=0) / n


def run_bins(eng, bins: list) -> dict:

    sync = torch.cuda.synchronize if eng.device.type == "cuda" else (lambda: None)
    tok = lambda t: torch.from_numpy(t).pin_memory() if eng.device.type == "cuda" else torch.from_numpy(t)  # noqa: E731
    eng.generate(eng.stage(tok(bins[0][0]), torch.from_numpy(bins[0][1]), bins[0][2]), bins[0][3])  # warm-up
    before = dict(eng.stats)
    sync()
    t0 = time.perf_counter()
    marks, done, out = [], 0, 0
    for tokens, cu, mx, ids in bins:
        outs = eng.generate(eng.stage(tok(tokens), torch.from_numpy(cu), mx), ids)
        out += sum(len(o.token_ids) for o in outs)
        done += len(ids)
        marks.append((time.perf_counter() - t0, done))
    sync()
    wall = time.perf_counter() - t0
    d = {k: eng.stats[k] - before.get(k, 0) for k in ("prefill_s", "decode_s", "decode_steps", "live_row_steps")}
    return {"wall_s": round(wall, 3), "docs_per_s": round(done / wall, 1), "output_tokens": out,
            "handed_back_at_80pct": round(_at(marks, wall, done), 4), "decode_steps": d["decode_steps"],
            "rows_per_decode_step": round(d["live_row_steps"] / max(1, d["decode_steps"]), 1),
            "prefill_s": round(d["prefill_s"], 3), "decode_s": round(d["decode_s"], 3)}


def run_continuous(eng, batcher, bins: list) -> dict:

    cuda = eng.device.type == "cuda"
    prep = [(torch.from_numpy(t).pin_memory() if cuda else torch.from_numpy(t), torch.from_numpy(cu), mx, ids)
            for t, cu, mx, ids in bins]
    before = dict(eng.stats)
    sync = (lambda: torch.cuda.synchronize(eng.device)) if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    marks, done, out, nxt, steps, prefills = [], 0, 0, 0, 0, 0
    while nxt < len(prep) or batcher.busy:
        while nxt < len(prep) and (not batcher.busy or batcher.wants_work()):
            tokens, cu, mx, ids = prep[nxt]
            batcher.add(eng.stage(tokens, cu, mx), list(ids), list(ids), eng.limits(list(ids)))
            nxt += 1
        r = batcher.step()
        steps += 1
        prefills += r.prefill_tokens > 0
        if r.done:
            done += len(r.done)
            out += sum(len(g.token_ids) for _, g, _ in r.done)
            marks.append((time.perf_counter() - t0, done))
    sync()
    wall = time.perf_counter() - t0
    d = {k: eng.stats[k] - before.get(k, 0) for k in ("decode_steps", "live_row_steps")}
    return {"wall_s": round(wall, 3), "docs_per_s": round(done / wall, 1), "output_tokens": out,
            "handed_back_at_80pct": round(_at(marks, wall, done), 4), "decode_steps": d["decode_steps"],
            "rows_per_decode_step": round(d["live_row_steps"] / max(1, d["decode_steps"]), 1),
            "scheduling_steps": steps, "prefill_forwards": prefills}


def ceilings(prompt_lens: list[int], out_lens: list[int], s_per_prompt: float, s_per_out: float,
             share: float = 0.8) -> dict:
    """Share of documents whose cost fits in the first `share` of the total, run one after another."""
    cost = [p * s_per_prompt + o * s_per_out for p, o in zip(prompt_lens, out_lens)]
    total = sum(cost)

    def fit(order) -> float:
        acc, n = 0.0, 0
        for i in order:
            acc += cost[i]
            if acc > share * total:
                break
            n += 1
        return round(n / len(cost), 4)

    idx = range(len(cost))
    return {"fifo": fit(idx), "shortest_prompt_first": fit(sorted(idx, key=lambda i: prompt_lens[i])),
            "shortest_cost_first_oracle": fit(sorted(idx, key=lambda i: cost[i])),
            "prefill_share_of_cost": round(sum(p * s_per_prompt for p in prompt_lens) / total, 4)}


def main(argv: list[str] | None = None) -> int:


    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch-config", default=None)
    ap.add_argument("--model", default="tiny-random")
    ap.add_argument("--documents", type=int, default=3000)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--token-budget", default="524288")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--stop-lengths", default="bench/results/stop_lengths_cpu.json")
    ap.add_argument("--settings", default="16384:0:0,16384:0:1,65536:0:1,65536:0.25:1,131072:0.25:1",
                    help="continuous runs, each prefill_step_tokens:refill_fraction:lag[:check_every]")
    ap.add_argument("--bin-check-every", default="8", help="bin-at-a-time runs, one per check_every, e.g. 8,16 "
                                                             "(the first is the engine's for the continuous runs)")
    ap.add_argument("--out", default="bench/results/continuous-sweep_cpu.json")
    a = ap.parse_args(argv)
    a.process, a.batching = "off", "bin"  # in this process: the engine is driven directly
    logging.basicConfig(level=logging.WARNING)
    settings, parts, cleanup = load_parts(a)
    eng = parts.engine
    docs = CORPORA["short"](a.documents)
    texts, _, planner = planned(settings, parts, docs)
    prompts = [list(p) for plan in planner.plan_many(texts) for p in plan.prompts]
    bins = pack(parts, prompts)
    cfg = parts.packer.config
    runs = {}
    for k in a.bin_check_every.split(","):  # bin at a time, with each check_every (decode steps per host look)
        eng.options = dataclasses.replace(eng.options, check_every=int(k))
        runs[f"bin k{k}"] = run_bins(eng, bins)
        print(f"bin k{k}: {runs[f'bin k{k}']}", flush=True)
    eng.options = dataclasses.replace(eng.options, check_every=int(a.bin_check_every.split(",")[0]))
    for spec in a.settings.split(","):
        prefill, refill, lag, *k = spec.split(":")
        b = eng.batcher(cfg.max_seqs, cfg.budget, int(prefill), float(refill), int(lag))
        if k:
            b.cfg.check_every = int(k[0])
        run_continuous(eng, b, bins[:1])  # warm-up: this batcher's first prefill shapes
        runs[f"continuous {spec}"] = r = run_continuous(eng, b, bins)
        print(f"continuous {spec}: {r}", flush=True)
    lens = [len(p) for p in prompts]
    outs = eng.limits(list(range(len(prompts)))) or [a.max_new_tokens] * len(prompts)  # the stop lengths
    b = next(iter(runs.values()))  # the first bin run
    ceil = ceilings(lens, outs, b["prefill_s"] / sum(lens), b["decode_s"] / max(1, b["output_tokens"]))
    print(f"publication ceiling at 80% of the work (documents one after another): {ceil}")
    device = torch.cuda.get_device_name() if eng.device.type == "cuda" else "cpu"
    result = {"device": device, "torch": torch.__version__, "model": a.arch_config or a.model,
              "documents": len(docs), "prompts": len(prompts), "prompt_tokens": sum(lens), "bins": len(bins),
              "seats": cfg.max_seqs, "token_budget": cfg.budget, "max_new_tokens": a.max_new_tokens,
              "check_every": eng.options.check_every, "stop_lengths": a.stop_lengths,
              "settings_key": "prefill_step_tokens:refill_fraction:lag[:check_every]", "runs": runs,
              "publication_ceiling_at_80pct": ceil,
              "command": "python -m bench.continuous_sweep " + " ".join(argv or [])}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    cleanup()
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
