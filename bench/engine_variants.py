"""Engine variants on one GPU, chosen by measurement (issue 10): `python bench/engine_variants.py --help`.

Random weights of a public architecture (config/models/*.json), bf16, the stress mix. In one run:
- prefill tokens/s: K/V heads expanded (torch 2.11's varlen_attn path) vs native GQA, eager vs
  compiled decoder layers;
- generation of --gen-docs documents x --max-new tokens, eager vs compiled layers: decode step
  against its memory floor, and the whole job against its physical floor;
- the Triton decode kernel's launch shapes (splits, block, warps, stages) on the batch's caches;
- a per-kernel profile (torch.profiler, CUDA time) of one prefill bin and of decode steps.
Writes one JSON (and the profile tables as text) under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from worker.bench.engine import MODELS, _stage, ceilings, make_mix, model_figures, prefill_flops, ribbon_generate, \
    ribbon_prefill


def _log(msg: str, **kv) -> None:
    print(json.dumps({"t": round(time.time(), 1), "msg": msg, **kv}), flush=True)


def decode_kernel_sweep(eng, docs: list[list[int]], max_new: int) -> list[dict]:
    """Time decode_attention for one layer on the caches of a batch of these documents (mid-decode)."""
    import torch
    import triton

    from worker.engine.decode_kernel import decode_attention
    from worker.engine.kvcache import slot_starts

    lens = [len(d) + max_new // 2 for d in docs]  # rows attended halfway through decode
    starts = slot_starts([len(d) for d in docs], max_new)
    rows = starts[-1] + len(docs[-1]) + max_new
    heads = eng.model.config.num_attention_heads
    g = torch.Generator(device="cuda").manual_seed(0)
    k = torch.randn(rows, eng.kv_heads, eng.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(rows, eng.kv_heads, eng.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
    q = torch.randn(len(docs), heads, eng.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
    st = torch.tensor(starts, dtype=torch.int32, device="cuda")
    ln = torch.tensor(lens, dtype=torch.int32, device="cuda")
    nbytes = 2 * sum(lens) * eng.kv_heads * eng.head_dim * 2  # K and V rows read once
    ref = decode_attention(q, k, v, st, ln, eng.head_dim**-0.5, 1)
    out = []
    for splits in (1, 2, 4, 8):
        for block in (32, 64):
            for warps in (4, 8):
                for stages in (2, 3):
                    fn = lambda: decode_attention(q, k, v, st, ln, eng.head_dim**-0.5, splits, block, warps, stages)  # noqa: E731
                    try:
                        err = ((fn().float() - ref.float()).norm() / ref.float().norm()).item()
                        ms = triton.testing.do_bench(fn, warmup=20, rep=60, return_mode="median")
                    except Exception as exc:  # a shape the compiler refuses is reported, not fatal
                        out.append({"splits": splits, "block": block, "warps": warps, "stages": stages,
                                    "error": f"{type(exc).__name__}: {exc}"[:200]})
                        continue
                    out.append({"splits": splits, "block": block, "warps": warps, "stages": stages, "ms": ms,
                                "gb_per_s": nbytes / ms / 1e6, "rel_err_vs_default": err})
    return out


def profile(fn, path: Path, rows: int = 40) -> dict:
    """Run fn under torch.profiler; write the per-kernel table; return the top kernels (CUDA us)."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    ka = p.key_averages()
    attr = "self_device_time_total" if hasattr(ka[0], "self_device_time_total") else "self_cuda_time_total"
    path.write_text(ka.table(sort_by=attr, row_limit=rows))
    kern = sorted((e for e in ka if "CUDA" in str(getattr(e, "device_type", ""))), key=lambda e: -getattr(e, attr))
    total = sum(getattr(e, attr) for e in kern)
    return {"wall_s": wall, "kernel_us_total": total,
            "top": [{"name": e.key[:120], "us": getattr(e, attr), "calls": e.count,
                     "share": getattr(e, attr) / max(total, 1)} for e in kern[:rows]]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/engine_variants.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="7b", choices=sorted(MODELS))
    p.add_argument("--prefill-docs", type=int, default=120)
    p.add_argument("--gen-docs", type=int, default=96)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--budget", type=int, default=524_288, help="generation token budget (the autotuned 7B value)")
    p.add_argument("--skip-sweep", action="store_true")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default="engine_variants_h200.json")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    import torch
    import transformers

    from worker.engine.fuse import compile_layers, uncompile_layers
    from worker.engine.loader import engine_for_model, random_model

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "transformers": transformers.__version__,
                 "args": vars(args)}

    def save():
        (out / args.name).write_text(json.dumps(res, indent=1, default=str))

    res["ceilings"] = ceil = ceilings()
    model = random_model(MODELS[args.model], torch.device("cuda"), torch.bfloat16)
    fig = model_figures(model)
    eng = engine_for_model(model, None, name=f"{args.model}-random", max_new_tokens=args.max_new, compile="off")
    eng.eos_ids = (model.config.eos_token_id,)
    res["backend"], res["figures"] = eng.backend, fig
    docs = make_mix("stress", model.config.vocab_size, n=args.prefill_docs)
    gen = docs[: args.gen_docs]
    flops = prefill_flops(fig, [len(d) for d in docs])
    rate, bw = ceil["bf16_matmul_tflops"] * 1e12, ceil["copy_bytes_per_s"]

    def prefill(name: str) -> None:
        t0 = time.perf_counter()
        r = ribbon_prefill(eng, docs, 32_768)  # its first bin is an untimed warm-up (compiles)
        r["first_call_s"] = time.perf_counter() - t0 - r["wall_s"]
        r["mfu"] = flops / r["wall_s"] / rate
        res.setdefault("prefill", {})[name] = r
        _log("prefill", variant=name, tok_s=round(r["tokens_per_s"]), mfu=round(r["mfu"], 3))
        save()

    def generate(name: str) -> None:
        eng.runner.clear()
        r = ribbon_generate(eng, gen, args.budget, fig, bw, rate)
        res.setdefault("generate", {})[name] = r
        _log("generate", variant=name, wall=round(r["wall_s"], 3), step_ms=round(r["decode_step_ms"], 3),
             vs_floor=round(r["decode_vs_floor"], 3), vs_job_floor=round(r["wall_vs_job_floor"], 3))
        save()

    eng.options.expand_kv = True
    prefill("expand_kv_eager")
    eng.options.expand_kv = False
    prefill("gqa_eager")
    generate("eager_layers")
    if not args.skip_sweep:
        res["decode_kernel_sweep"] = sweep = decode_kernel_sweep(eng, gen, args.max_new)
        ok = [s for s in sweep if "ms" in s]
        _log("decode kernel", best=min(ok, key=lambda s: s["ms"]), default=[s for s in ok if s["block"] == 64
             and s["warps"] == 4 and s["stages"] == 2])
        save()
    prof_docs = [docs[i] for i in range(min(len(docs), 24))]
    res["profile_prefill_eager"] = profile(lambda: eng.prefill_last_logits(_stage(eng, prof_docs, list(range(len(prof_docs))))),
                                           out / "engine_profile_prefill_eager.txt")
    t0 = time.perf_counter()
    compile_layers(eng.base)
    eng.compiled = True
    prefill("gqa_compiled")
    res["compile_first_prefill_s"] = time.perf_counter() - t0
    generate("compiled_layers")
    res["profile_prefill_compiled"] = profile(
        lambda: eng.prefill_last_logits(_stage(eng, prof_docs, list(range(len(prof_docs))))),
        out / "engine_profile_prefill_compiled.txt")
    short = gen[:96]
    res["profile_generate_compiled"] = profile(lambda: eng.generate(_stage(eng, short, list(range(len(short))))),
                                               out / "engine_profile_generate_compiled.txt")
    try:
        res["dynamo_counters"] = {k: dict(v) for k, v in torch._dynamo.utils.counters.items()}
    except Exception as exc:  # diagnostics only
        res["dynamo_counters"] = str(exc)
    save()
    uncompile_layers(eng.base)
    print(json.dumps({k: res[k] for k in ("prefill", "generate")}, indent=1, default=str)[:6000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
