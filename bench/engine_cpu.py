"""CPU engine speed: `Engine.generate` (reference backend, fp32) against HF padded `generate`.

Tiny checkpoint from worker/engine/tiny.py (hidden 64, 2 layers, GQA 4/2), random prompt ids
of 20-380 tokens (seeded), bins of 40 and 200 documents, max_new_tokens 4 and 32, greedy.
Both systems see the same documents and EOS; HF runs one left-padded batch (sdpa, attention
mask). Each figure is the best of --repeats timed runs after one warm-up run (its time is kept:
*_first_call_s, the table's "1st"). The table also
shows how many documents got identical tokens from both systems (a sanity check, not a test).

    .venv/bin/python -m bench.engine_cpu [--docs 40 200] [--max-new 4 32] [--repeats 3]
        [--threads N] [--name engine_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from worker.config.settings import ModelRun
from worker.engine.loader import load_engine
from worker.engine.tiny import make_tiny_checkpoint

RESULTS = Path(__file__).resolve().parent / "results"


def make_docs(n: int, vocab: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, vocab) for _ in range(rng.randint(20, 380))] for _ in range(n)]


def best_of(fn, repeats: int):
    t0 = time.perf_counter()
    result = fn()  # warm-up
    times = [time.perf_counter() - t0]
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, min(times[1:]), times


def ribbon_run(eng, docs: list[list[int]]):
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + len(d))
    ribbon = torch.tensor([t for d in docs for t in d], dtype=torch.int32)  # [T]
    staged = eng.stage(ribbon, torch.tensor(cu, dtype=torch.int32), max(len(d) for d in docs))
    return [o.token_ids for o in eng.generate(staged)]


def hf_run(model, docs: list[list[int]], max_new: int, eos: list[int], pad: int):
    width = max(len(d) for d in docs)
    ids = torch.tensor([[pad] * (width - len(d)) + d for d in docs])  # [B, width] left-padded
    mask = torch.tensor([[0] * (width - len(d)) + [1] * len(d) for d in docs])  # [B, width]
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             eos_token_id=eos, pad_token_id=pad)  # [B, width + new]
    result = []
    for row in out[:, width:].tolist():
        keep = []
        for t in row:
            if t in eos:
                break
            keep.append(t)
        result.append(keep)
    return result


def measure(path: Path, hf, n_docs: int, max_new: int, repeats: int) -> dict:
    threads = torch.get_num_threads()  # the loader picks its own count (1 on small machines): keep this one
    eng = load_engine(ModelRun(path=str(path), max_new_tokens=max_new))
    torch.set_num_threads(threads)
    docs = make_docs(n_docs, hf.config.vocab_size, seed=n_docs)
    eos = list(eng.eos_ids)
    first = dict(eng.stats)

    def run():
        nonlocal first
        if eng.stats["bins"] == 1:  # after the warm-up: time only the measured runs
            first = dict(eng.stats)
        return ribbon_run(eng, docs)

    ours, t_ours, all_ours = best_of(run, repeats)
    runs = eng.stats["bins"] - first["bins"]
    prefill = (eng.stats["prefill_s"] - first["prefill_s"]) / runs
    decode = (eng.stats["decode_s"] - first["decode_s"]) / runs
    steps = (eng.stats["decode_steps"] - first["decode_steps"]) / runs
    theirs, t_hf, all_hf = best_of(lambda: hf_run(hf, docs, max_new, eos, hf.config.pad_token_id), repeats)
    return {
        "docs": n_docs, "prompt_tokens": sum(len(d) for d in docs), "max_new_tokens": max_new,
        "ribbon_s": t_ours, "ribbon_first_call_s": all_ours[0], "ribbon_runs_s": all_ours[1:], "ribbon_prefill_s_mean": prefill,
        "ribbon_decode_s_mean": decode, "ribbon_decode_steps": steps,
        "hf_padded_s": t_hf, "hf_first_call_s": all_hf[0], "hf_runs_s": all_hf[1:], "ratio_ribbon_over_hf": t_ours / t_hf,
        "output_tokens": sum(len(t) for t in ours),
        "docs_identical_to_hf": sum(a == b for a, b in zip(ours, theirs)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[40, 200])
    ap.add_argument("--max-new", type=int, nargs="+", default=[4, 32])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    ap.add_argument("--name", default="engine_cpu.json")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = make_tiny_checkpoint(Path(tmp) / "tiny", arch="qwen2", seed=1)
        hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
        for n in args.docs:
            for m in args.max_new:
                rows.append(measure(path, hf, n, m, args.repeats))
                r = rows[-1]
                print(f"docs={n} max_new={m}: ribbon {r['ribbon_s']:.3f} s, HF {r['hf_padded_s']:.3f} s", flush=True)
    print()
    print("| docs | prompt tokens | max_new | Ribbon s (prefill / decode) | Ribbon 1st s | HF padded s | HF 1st s "
          "| Ribbon/HF | same tokens |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['docs']} | {r['prompt_tokens']} | {r['max_new_tokens']} | {r['ribbon_s']:.3f} "
              f"({r['ribbon_prefill_s_mean']:.3f} / {r['ribbon_decode_s_mean']:.3f}) | {r['ribbon_first_call_s']:.3f} | "
              f"{r['hf_padded_s']:.3f} | {r['hf_first_call_s']:.3f} | "
              f"{r['ratio_ribbon_over_hf']:.2f} | {r['docs_identical_to_hf']}/{r['docs']} |")
    out = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "cpu_count": __import__("os").cpu_count()},
        "model": "tiny qwen2 (hidden 64, 2 layers, 4 heads / 2 kv heads), fp32, reference backend",
        "repeats": args.repeats,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.name).write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {RESULTS / args.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
