"""Engine variants on one GPU, chosen by measurement (issue 10): `python -m bench.engine_variants --help`.

Random weights of a public architecture (config/models/*.json), bf16, the stress mix. In one run:
- the prefill attention kernels alone on one bin: FlashAttention-2 (aten) vs cuDNN, GQA native and
  K/V expanded (time, TFLOP/s, error against FA2);
- prefill tokens/s, compiled layers: separate vs merged projections (q/k/v and gate/up as one
  GEMM each), 32k and 64k bins; compiled graphs and recompiles per bin size (the committed JSON's
  `merged_cudnn` row came from an engine option since removed: cuDNN attention in the whole prefill);
- generation of --gen-docs documents x --max-new tokens, separate vs merged projections: decode step
  against its memory floor, and the whole job against its physical floor;
- the Triton decode kernel's launch shapes (--sweep);
- a per-kernel profile (torch.profiler, CUDA time) of one prefill bin and of the generation.
Writes one JSON (and the profile tables as text) under --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers
import triton

from bench.engine import MODELS, stage_docs, make_mix, ribbon_generate, ribbon_prefill
from bench.engine_floors import ceilings, model_figures, prefill_flops
from bench.engine_profile import profile
from worker.engine.attention import flash_gqa
from worker.engine.decode_kernel import decode_attention
from worker.engine.kvcache import slot_starts
from worker.engine.loader import engine_for_model, random_model
from worker.engine.merge import merge_projections, unmerge_projections


def _log(msg: str, **kv) -> None:
    print(json.dumps({"t": round(time.time(), 1), "msg": msg, **kv}), flush=True)


def decode_kernel_sweep(eng, docs: list[list[int]], max_new: int) -> list[dict]:
    """Time decode_attention for one layer on the caches of a batch of these documents (mid-decode)."""
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
                    except Exception as exc:  # noqa: BLE001 - a shape the compiler refuses is reported, not fatal
                        out.append({"splits": splits, "block": block, "warps": warps, "stages": stages,
                                    "error": f"{type(exc).__name__}: {exc}"[:200]})
                        continue
                    out.append({"splits": splits, "block": block, "warps": warps, "stages": stages, "ms": ms,
                                "gb_per_s": nbytes / ms / 1e6, "rel_err_vs_default": err})
    return out


def _cudnn_varlen(q, k, v, cu, max_seqlen: int, scale: float):
    """cuDNN's fused attention over a packed ribbon (ragged offsets from cu_seqlens: what torch's varlen_attn
    calls when it picks cuDNN). Measured here only: on the H200 it ran 26x slower than FA2 (docs/engine.md)."""
    return torch.ops.aten._cudnn_attention_forward(q, k, v, None, cu, cu, max_seqlen, max_seqlen, True, 0.0, True,
                                                   False, scale=scale)[0]  # [T, H, D]


def attention_kernels(docs: list[list[int]], heads: int, kv_heads: int, dim: int) -> dict:
    """FA2 vs cuDNN on one packed bin of these documents (q/k/v random bf16), each against FA2."""
    lens = [len(d) for d in docs]
    cu_host = [0]
    for n in lens:
        cu_host.append(cu_host[-1] + n)
    t = cu_host[-1]
    cu = torch.tensor(cu_host, dtype=torch.int32, device="cuda")
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(t, heads, dim, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(t, kv_heads, dim, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(t, kv_heads, dim, device="cuda", dtype=torch.bfloat16, generator=g)
    ke, ve = (x.repeat_interleave(heads // kv_heads, dim=1) for x in (k, v))
    mx, scale = max(lens), dim**-0.5
    flops = 4 * heads * dim * sum(n * (n + 1) / 2 for n in lens)  # causal QK^T + PV
    ref = flash_gqa(q, k, v, cu, mx, scale).float()
    out: dict = {"tokens": t, "docs": len(lens), "flops": flops}
    cases = {"fa2_gqa": lambda: flash_gqa(q, k, v, cu, mx, scale),
             "cudnn_gqa": lambda: _cudnn_varlen(q, k, v, cu, mx, scale),
             "cudnn_expanded": lambda: _cudnn_varlen(q, ke, ve, cu, mx, scale)}
    for name, fn in cases.items():
        try:
            err = ((fn().float() - ref).norm() / ref.norm()).item()
            ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        except Exception as exc:  # noqa: BLE001 - a kernel this torch/cuDNN refuses is reported, not fatal
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        out[name] = {"ms": ms, "tflops": flops / ms / 1e9, "rel_err_vs_fa2": err}
    return out


def _kernels_only(args) -> int:
    with open(MODELS[args.model]) as f:
        cfg = json.load(f)
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    docs = make_mix("stress", cfg["vocab_size"], n=24)
    print("KERNELS " + json.dumps(attention_kernels(docs, heads, kv_heads, cfg["hidden_size"] // heads)))
    return 0


def _kernels_in_child(args) -> dict:
    """attention_kernels in a child process: a kernel that faults cannot poison this process's CUDA context."""
    proc = subprocess.run([sys.executable, "-m", __spec__.name, "--kernels-only", "--model", args.model], capture_output=True,
                          text=True, timeout=240)
    for line in proc.stdout.splitlines():
        if line.startswith("KERNELS "):
            return json.loads(line[len("KERNELS "):])
    return {"child_failed": {"rc": proc.returncode, "stderr": proc.stderr[-1500:]}}


def graph_stats() -> dict:
    c = torch._dynamo.utils.counters
    return {"unique_graphs": c["stats"].get("unique_graphs", 0), "frames_ok": c["frames"].get("ok", 0),
            "recompiles": sum(c["recompiles"].values()) if "recompiles" in c else 0,
            "graph_breaks": sum(c["graph_break"].values())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/engine_variants.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="7b", choices=sorted(MODELS))
    p.add_argument("--prefill-docs", type=int, default=120)
    p.add_argument("--gen-docs", type=int, default=96)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--budget", type=int, default=524_288, help="generation token budget (the autotuned 7B value)")
    p.add_argument("--sweep", action="store_true", help="also sweep the decode kernel's launch shapes")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default="engine_variants_h200.json")
    p.add_argument("--kernels-only", action="store_true", help="only the attention kernels (JSON on stdout)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.kernels_only:
        return _kernels_only(args)


    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "transformers": transformers.__version__,
                 "cudnn": torch.backends.cudnn.version(), "args": vars(args)}

    def save():
        (out / args.name).write_text(json.dumps(res, indent=1, default=str))

    res["ceilings"] = ceil = ceilings()
    model = random_model(MODELS[args.model], torch.device("cuda"), torch.bfloat16)
    fig = model_figures(model)
    cfg = model.config
    docs = make_mix("stress", cfg.vocab_size, n=args.prefill_docs)
    res["attention_kernels"] = kern = _kernels_in_child(args)
    _log("attention kernels", **kern)
    save()
    eng = engine_for_model(model, None, name=f"{args.model}-random", max_new_tokens=args.max_new, compile="on",
                           merge="off")
    eng.eos_ids = (cfg.eos_token_id,)
    res["backend"], res["figures"] = eng.backend, fig
    gen = docs[: args.gen_docs]
    flops = prefill_flops(fig, [len(d) for d in docs])
    rate, bw = ceil["bf16_matmul_tflops"] * 1e12, ceil["copy_bytes_per_s"]

    def prefill(name: str, chunk: int = 32_768) -> None:
        eng.options.chunk_tokens = chunk
        t0 = time.perf_counter()
        g0 = graph_stats()
        r = ribbon_prefill(eng, docs, chunk)  # its first bin is an untimed warm-up (compiles)
        r["first_call_s"] = time.perf_counter() - t0 - r["wall_s"]
        r["mfu"] = flops / r["wall_s"] / rate
        r["graphs_before"], r["graphs_after"] = g0, graph_stats()
        res.setdefault("prefill", {})[name] = r
        _log("prefill", variant=name, tok_s=round(r["tokens_per_s"]), mfu=round(r["mfu"], 3), graphs=r["graphs_after"])
        save()

    def generate(name: str) -> None:
        eng.runner.clear()
        r = ribbon_generate(eng, gen, args.budget, fig, bw, rate)
        res.setdefault("generate", {})[name] = r
        _log("generate", variant=name, wall=round(r["wall_s"], 3), step_ms=round(r["decode_step_ms"], 3),
             vs_floor=round(r["decode_vs_floor"], 3), vs_job_floor=round(r["wall_vs_job_floor"], 3))
        save()

    prefill("separate_fa2")
    generate("separate_fa2")
    merge_projections(eng.base)
    eng.merged = True
    prefill("merged_fa2")
    prefill("merged_fa2_64k", 65_536)
    eng.options.chunk_tokens = 32_768
    generate("merged_flash")
    if args.sweep:
        res["decode_kernel_sweep"] = decode_kernel_sweep(eng, gen, args.max_new)
        save()
    prof_docs = docs[:24]
    res["profile_prefill"] = profile(lambda: eng.prefill_last_logits(stage_docs(eng, prof_docs, list(range(24)))),
                                     out / "engine_profile_prefill_merged.txt")
    res["profile_generate"] = profile(lambda: eng.generate(stage_docs(eng, gen, list(range(len(gen))))),
                                      out / "engine_profile_generate_merged.txt")
    res["dynamo_counters"] = {k: {str(kk): vv for kk, vv in v.items()} for k, v in torch._dynamo.utils.counters.items()}
    save()
    unmerge_projections(eng.base)
    summary = {k: round(v["tokens_per_s"]) for k, v in res["prefill"].items()}
    summary.update({k: [round(v["wall_s"], 3), round(v["decode_step_ms"], 3), round(v["wall_vs_job_floor"], 3)]
                    for k, v in res["generate"].items()})
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
