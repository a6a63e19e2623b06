"""The e2e-check's model work replayed on the CPU: the real ContinuousBatcher over a tiny engine, the
documents' real prompt lengths, bins arriving all at once (the engine alone) or on the arrival schedule
of an end-to-end run; scheduling steps counted and the GPU time estimated with a per-step cost model.

The workload is `bench/device_run.sh e2e-check`'s: 3,000 `short`-corpus documents, their prompts as the
worker builds them (digest compaction on, the offline tokenizer every benchmark checkpoint carries, so
the same 1,718,152 prompt tokens), every document decoding exactly 64 tokens, a 524,288-token budget and
256 seats. The batcher runs as on CUDA (lag 1, `check_every` decode steps a round); the tiny model's
tokens are never read (EOS off), only the schedule is.

Schedules:
  alone:       the packer's 12 bins, all there at the start (bench.e2e's engine-only run);
  arrival rN:  the bins the worker handed over in run N of the end-to-end file (--arrivals), each
               there at its hand-over time on the replay's clock (the modelled GPU seconds so far).

Cost model (modelled GPU seconds of one scheduling step):
    prefill_fixed_s [if it prefills] + prefill_token_s x prompt tokens + k x (decode_fixed_s + decode_row_s x bucket)
with k the decode steps it launched and bucket the decode graph's batch size (decode.bucket_for).
The defaults are fitted to the H200 figures of bench/results/continuous-sweep_h200.json and
engine-0.5b_h200.json (the docstring of CostModel says how); the ratio of two schedules is what the
replay is for, the absolute seconds are the H200's estimate.

    .venv/bin/python -m bench.e2e_replay [--policies current,joined] [--out bench/results/e2e_replay_cpu.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.results_io import command_line, save
from worker.config.settings import ModelRun
from worker.engine.decode import bucket_for
from worker.engine.loader import load_engine
from worker.engine.prefill import chunk_documents
from worker.engine.tiny import make_tiny_checkpoint

RESULTS = Path(__file__).resolve().parent / "results"
POLICIES = {"before": 0, "after": None}  # merge_steps: 0 turns the merge off; None keeps the batcher's


@dataclass(frozen=True)
class CostModel:
    """Seconds per scheduling step. Fitted to H200 figures (0.5B, bf16):
    - decode: 3.26 ms a step at 236 rows (continuous-sweep_h200 'bin': 5.005 s over 1,536 steps) and
      2.04 ms at 96 rows (engine-0.5b_h200 generate): 1.2 ms + 8.7 us a row of the bucket;
    - prefill: 9.9 ms a forward, from the sweep's 131072:0:1 against 131072:0.25:1 (0.982 s more for 125
      more prefill forwards and 80 fewer decode steps); then 1.50 us a prompt token from the 'bin' run's
      2.698 s of prefill over 1,718,152 tokens in 12 forwards."""
    prefill_fixed_s: float = 9.9e-3
    prefill_token_s: float = 1.50e-6
    decode_fixed_s: float = 1.2e-3
    decode_row_s: float = 8.7e-6

    def step(self, prefill_tokens: int, k: int, rows: int) -> tuple[float, float]:
        """(prefill s, decode s) of one scheduling step."""
        pre = (self.prefill_fixed_s + self.prefill_token_s * prefill_tokens) if prefill_tokens else 0.0
        dec = k * (self.decode_fixed_s + self.decode_row_s * bucket_for(rows)) if k else 0.0
        return pre, dec


def prompt_lengths(documents: int, max_new: int, budget: int) -> list[int]:
    """The worker's prompt lengths for the `short` corpus (bench.e2e's planner, tiny-random's tokenizer)."""
    from bench.e2e import CORPORA, planned  # noqa: PLC0415 - the worker's parts, only when lengths are built
    from bench.parts import load_parts  # noqa: PLC0415

    a = argparse.Namespace(arch_config=None, model="tiny-random", max_new_tokens=max_new, token_budget=str(budget),
                           device="cpu", process="off", batching="continuous")
    settings, parts, cleanup = load_parts(a)
    texts, _, planner = planned(settings, parts, CORPORA["short"](documents))
    lengths = [len(p) for plan in planner.plan_many(texts) for p in plan.prompts]
    cleanup()
    return lengths


def packer_bins(lengths: list[int], seats: int, budget: int, reserve: int) -> list[list[int]]:
    """The documents of each bin, in order, as the real packer cuts these lengths as a backlog (its
    arrival order: a prefix, then the shortest that fit; bench.e2e.pack_bins, as the engine-alone run packs them)."""
    from bench.e2e import pack_bins  # noqa: PLC0415 - torch and the worker's parts, only when used
    from worker.packer import Packer, PackerConfig  # noqa: PLC0415

    packer = Packer.from_config(PackerConfig(budget=budget, reserve_per_seq=reserve, max_seqs=seats), device="cpu")
    try:
        return [b[3] for b in pack_bins(packer, [[5] * n for n in lengths])]
    finally:
        packer.close()


def tiny_engine(folder: Path, max_new: int, check_every: int, stop_lengths: str | None = None):
    """A 1-layer tiny model on the CPU with EOS off: every document decodes exactly max_new tokens, or the
    stop length its seed picks (`stop_lengths`: a file as ModelRun.stop_lengths_file reads)."""
    path = make_tiny_checkpoint(folder, arch="qwen2", seed=1, num_hidden_layers=1, hidden_size=32,
                                intermediate_size=32)
    run = ModelRun(path=str(path), max_new_tokens=max_new, repetition_penalty=1.0, no_repeat_ngram=0,
                   min_new_tokens=0, stop_strings=(), stop_lengths_file=stop_lengths)
    eng = load_engine(run, check_every=check_every, cut_loops=False)
    eng.eos_ids = (-1,)  # no token is -1: documents end at their limit
    return eng


def replay(eng, batcher, lengths: list[int], bins: list[tuple[float, list[int]]], cost: CostModel) -> dict:
    """Bins (arrival time on the replay's clock, documents) through the batcher as the engine process takes
    them (worker/remote/child_continuous.py: while idle or wanting work); per step its cost."""
    batcher._steps_to_run = lambda: batcher.cfg.check_every  # as on CUDA: check_every steps a round
    admitted: list[list[int]] = []  # per step, the prompt lengths it admitted
    admit = batcher.sched.admit

    def counted(*args, **kw):
        out = admit(*args, **kw)
        admitted.append([e.length for e in out])
        return out

    batcher.sched.admit = counted
    chunks = 0  # prefill forwards of at most chunk_tokens (prefill.chunk_documents)
    arrived = {d: t for t, ids in bins for d in ids}
    latency: list[float] = []
    out_tokens = 0
    now = idle = pre_s = dec_s = 0.0
    nxt, done, steps, rows_total, log = 0, 0, 0, 0, []
    hist: dict[int, int] = {}  # decode steps by bucket
    while nxt < len(bins) or batcher.busy:
        if not batcher.busy and bins[nxt][0] > now:
            idle += bins[nxt][0] - now  # the engine waits for its next bin
            now = bins[nxt][0]
        while nxt < len(bins) and bins[nxt][0] <= now and (not batcher.busy or batcher.wants_work()):
            ids = bins[nxt][1]
            batcher.add(_stage(eng, [lengths[d] for d in ids]), ids, ids, eng.limits(ids))
            nxt += 1
        before = dict(eng.stats)
        r = batcher.step()
        k = eng.stats["decode_steps"] - before["decode_steps"]
        rows = (eng.stats["live_row_steps"] - before["live_row_steps"]) // k if k else 0
        p, d = cost.step(r.prefill_tokens, k, rows)
        pre_s, dec_s, now, steps, done = pre_s + p, dec_s + d, now + p + d, steps + 1, done + len(r.done)
        latency += [now - arrived[tag] for tag, _, _ in r.done]
        out_tokens += sum(len(g.token_ids) for _, g, _ in r.done)
        if k:
            hist[bucket_for(rows)] = hist.get(bucket_for(rows), 0) + k
            rows_total += rows * k
        if r.prefill_tokens:
            log.append((round(now, 4), len(admitted[-1]), r.prefill_tokens, rows))
            chunks += len(chunk_documents(admitted[-1], batcher.cfg.chunk_tokens))
    forwards = [x[2] for x in log]
    decode_steps = sum(hist.values())
    return {"documents": done, "output_tokens": out_tokens, "gpu_s": round(pre_s + dec_s, 4), "prefill_s": round(pre_s, 4),
            "decode_s": round(dec_s, 4), "idle_s": round(idle, 4), "scheduling_steps": steps,
            "prefill_forwards": len(forwards), "prefill_chunks": chunks, "prefill_tokens_per_forward_mean": round(sum(forwards) / len(forwards)),
            "prefill_tokens_per_forward_min": min(forwards), "decode_steps": decode_steps,
            "rows_per_decode_step": round(rows_total / max(1, decode_steps), 1),
            "decode_steps_by_bucket": dict(sorted(hist.items())), "latency_s": _quantiles(latency),
            "prefills": [{"t": t, "docs": n, "tokens": tok, "rows_after": m} for t, n, tok, m in log]}


def _quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    at = lambda q: round(xs[min(len(xs) - 1, int(q * len(xs)))], 4)  # noqa: E731
    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "mean": round(sum(xs) / len(xs), 4)}


def _stage(eng, lengths: list[int]):
    """A bin of documents of these lengths (token 5 repeated: the tokens are never read)."""
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    pad = (-cu[-1]) % 16
    return eng.stage(torch.full((cu[-1] + pad,), 5, dtype=torch.int32), torch.tensor(cu, dtype=torch.int32),
                     max(lengths))


def schedules(lengths: list[int], arrivals: dict, seats: int, budget: int, reserve: int) -> dict[str, list]:
    """name -> bins as (arrival s, the documents' indices)."""
    out = {"alone": [(0.0, ids) for ids in packer_bins(lengths, seats, budget, reserve)]}
    sizes = _in_order(arrivals["docs_per_bin"])  # the file has each bin's size only: documents in order
    for i, run in enumerate(arrivals["runs"]):
        out[f"arrival r{i}"] = list(zip(run["handed_over_s"], sizes))
    return out


def _in_order(sizes: list[int]) -> list[list[int]]:
    """Bins of these sizes over the documents 0, 1, 2, ... in order."""
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out


def steady_bins(documents: int, rate: float, every: float) -> list[tuple[float, list[int]]]:
    """A steady load: a bin every `every` seconds, `rate` documents a second in all, documents in order."""
    times, sizes, n, i = [], [], 0, 0
    while n < documents:
        k = min(documents - n, int(rate * every * (i + 1)) - n)
        if k > 0:
            times.append(round(i * every, 4))
            sizes.append(k)
            n += k
        i += 1
    return list(zip(times, _in_order(sizes)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--documents", type=int, default=3000)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--token-budget", type=int, default=524_288)
    ap.add_argument("--seats", type=int, default=256)
    ap.add_argument("--check-every", type=int, default=8)
    ap.add_argument("--prefill-step-tokens", type=int, default=131_072)
    ap.add_argument("--refill-fraction", type=float, default=0.25)
    ap.add_argument("--arrivals", default=str(RESULTS / "e2e-check_h100_arrivals.json"))
    ap.add_argument("--steady", type=float, default=0.9, help="the steady schedule's load, a share of the "
                    "modelled capacity (documents over the engine alone's modelled seconds)")
    ap.add_argument("--steady-bin-s", type=float, default=0.025, help="seconds between the steady schedule's bins")
    ap.add_argument("--stop-lengths", default=None, help="each document stops after a length of this file "
                    "(bench/results/stop_lengths_cpu.json: SmolLM2's); default: every one takes max_new_tokens")
    ap.add_argument("--lengths", default=None, help="a JSON list of prompt lengths (default: built as the worker does)")
    ap.add_argument("--out", default=str(RESULTS / "e2e_replay_cpu.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    lengths = json.loads(Path(a.lengths).read_text()) if a.lengths else prompt_lengths(a.documents, a.max_new_tokens,
                                                                                        a.token_budget)
    arrivals = json.loads(Path(a.arrivals).read_text())
    cost = CostModel()
    with tempfile.TemporaryDirectory() as tmp:
        eng = tiny_engine(Path(tmp) / "tiny", a.max_new_tokens, a.check_every, a.stop_lengths)
        runs: dict[str, dict] = {p: {} for p in POLICIES}
        todo = list(schedules(lengths, arrivals, a.seats, a.token_budget, a.max_new_tokens).items())
        while todo:
            name, bins = todo.pop(0)
            for policy, merge in POLICIES.items():
                t0 = time.perf_counter()
                b = eng.batcher(a.seats, a.token_budget, a.prefill_step_tokens, a.refill_fraction, lag=1)
                if merge is not None:
                    b.sched.merge_steps = merge
                runs[policy][name] = r = replay(eng, b, lengths, bins, cost)
                print(f"{policy:6} {name:12} {r['gpu_s']:.3f} s (prefill {r['prefill_s']:.3f}, decode "
                      f"{r['decode_s']:.3f}, idle {r['idle_s']:.3f}); {r['prefill_forwards']} prefills of "
                      f"{r['prefill_tokens_per_forward_mean']} tokens, {r['decode_steps']} decode steps of "
                      f"{r['rows_per_decode_step']} rows; latency {r['latency_s']} ({time.perf_counter() - t0:.1f} s)",
                      flush=True)
            if name == "alone":  # then a steady load at a share of the capacity the engine alone has
                rate = a.steady * len(lengths) / runs["before"]["alone"]["gpu_s"]
                todo.append((f"steady {a.steady:g}", steady_bins(len(lengths), rate, a.steady_bin_s)))
    alone = runs["before"]["alone"]["gpu_s"]
    result = {"documents": len(lengths), "prompt_tokens": sum(lengths), "max_new_tokens": a.max_new_tokens,
              "seats": a.seats, "token_budget": a.token_budget, "check_every": a.check_every, "lag": 1,
              "stop_lengths": a.stop_lengths, "prefill_step_tokens": a.prefill_step_tokens, "refill_fraction": a.refill_fraction,
              "cost_model": dataclasses.asdict(cost), "arrivals": a.arrivals,
              "policies": {"before": "merge_steps 0: a backlog refills free seats at once (refill rule only)",
                           "after": "merge_steps check_every (the batcher's default): a backlog waits for a "
                                    "cohort that ends within a round"},
              "vs_before_alone_pct": {p: {k: round(100 * (r["gpu_s"] / alone - 1), 2) for k, r in rs.items()}
                                      for p, rs in runs.items()},
              "runs": runs, "command": command_line("bench.e2e_replay", argv)}
    save(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
