"""`python -m bench.engine`: Ribbon's packed engine against Hugging Face on one GPU.

Random weights of public architectures (config/models/*.json), bf16. For each model and mix:
prefill only (HF padded batches of 8 vs Ribbon packed bins) and generation of max_new tokens on
a subset that every system runs (HF generate in padded batches of 8, HF generate_batch, Ribbon).
Ceilings measured in the same run: bf16 matmul rate (MFU) and device copy bandwidth (decode floor).
Writes one JSON (and, with --plot, PNGs) under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import random
import sys
import time
from pathlib import Path

import torch
import transformers

from bench import engine_hf as hf
from bench.engine_floors import ceilings, job_floor_s, model_figures, prefill_flops
from bench.engine_plot import plot
from bench.engine_profile import profile_engine
from worker.engine.attention import REGISTERED
from worker.engine.autotune import autotune_budget
from worker.engine.decode import want_kv_write
from worker.engine.fuse import compile_layers, uncompile_layers
from worker.engine.loader import engine_for_model, random_model
from worker.engine.merge import merge_projections, unmerge_projections
from worker.packer import Packer, PackerConfig

MIXES = ("stress", "uniform")
MODELS = {"7b": "config/models/qwen2.5-7b.json", "0.5b": "config/models/qwen2.5-0.5b.json"}


def make_mix(kind: str, vocab: int, seed: int = 0, n: int | None = None) -> list[list[int]]:
    """stress: 400 docs alternating 60-175 and 2,420-2,660 tokens; uniform: 300 docs of 65-2,530."""
    rng = random.Random(seed)
    if kind == "stress":
        lens = [rng.randint(60, 175) if i % 2 == 0 else rng.randint(2420, 2660) for i in range(n or 400)]
    elif kind == "uniform":
        lens = [rng.randint(65, 2530) for _ in range(n or 300)]
    else:
        raise ValueError(f"unknown mix {kind!r}")
    return [[rng.randrange(100, vocab - 100) for _ in range(k)] for k in lens]


def product_bins(docs: list[list[int]], budget: int, reserve: int, device: str = "cuda", order: str | None = None):
    """The worker's own packer (worker.packer.Packer: the C++ core, pinned slots, alignment; `order`
    None: the worker's default, batching.order) over these documents, all submitted at once and
    drained, as the worker packs a backlog. Yields (packer, bin); the caller releases each bin's
    slot once its copy to the device is done."""
    cfg = PackerConfig(budget=budget, reserve_per_seq=reserve, max_seqs=max(1, len(docs)), efficient_tokens=budget,
                       max_wait_s=0.0, slots=3)
    if order is not None:
        cfg = dataclasses.replace(cfg, order=order)
    packer = Packer.from_config(cfg, device=device)
    for i, d in enumerate(docs):
        packer.submit(i, d, key=0)
    packer.drain(True)
    seen = 0
    try:
        while seen < len(docs):
            b = packer.next_bin(60.0)
            if b is None:
                raise RuntimeError(f"the packer gave no bin after {seen} of {len(docs)} documents")
            seen += len(b.seq_ids)
            yield packer, b
    finally:
        packer.close()


def first_bin(docs: list[list[int]], budget: int, reserve: int) -> list[int]:
    """The first documents whose weights fit one bin (warm-ups: a bin of the timed run's size)."""
    idx, used = [], 0
    for i, d in enumerate(docs):
        if idx and used + len(d) + reserve > budget:
            break
        idx.append(i)
        used += len(d) + reserve
    return idx


def stage_docs(eng, docs: list[list[int]], idx: list[int]):
    sel = [docs[i] for i in idx]
    cu = [0]
    for d in sel:
        cu.append(cu[-1] + len(d))
    pad = (-cu[-1]) % 16
    ribbon = torch.empty(cu[-1] + pad, dtype=torch.int32).pin_memory()  # [T_pad] like a packer slot
    ribbon[: cu[-1]] = torch.tensor([t for d in sel for t in d], dtype=torch.int32)
    ribbon[cu[-1]:] = 0
    return eng.stage(ribbon, torch.tensor(cu, dtype=torch.int32), max(len(d) for d in sel))


def ribbon_prefill(eng, docs: list[list[int]], bin_tokens: int) -> dict:
    eng.prefill_last_logits(stage_docs(eng, docs, first_bin(docs, bin_tokens, 0)))  # warm-up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    bins = padded = 0
    cur = None
    for packer, b in product_bins(docs, bin_tokens, 0):  # packing runs in the timed region, as in the worker
        nxt = (eng.stage(b.tokens, b.cu_seqlens, b.max_seqlen), b)  # this copy overlaps the previous bin's compute
        if cur is not None:
            _prefill_and_release(eng, packer, *cur)
        cur, bins, padded = nxt, bins + 1, padded + len(b.tokens)
    if cur is not None:
        _prefill_and_release(eng, packer, *cur)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    real = sum(len(d) for d in docs)
    return {"wall_s": wall, "real_tokens": real, "tokens_per_s": real / wall, "padding_pct": 100.0 * (1 - real / padded),
            "bins": bins, "peak_vram_gib": torch.cuda.max_memory_allocated() / 2**30}


def _prefill_and_release(eng, packer, staged, b) -> None:
    eng.prefill_last_logits(staged)
    staged.wait_copied()
    packer.release(b.slot)


def ribbon_generate(eng, docs: list[list[int]], budget: int, fig: dict, bw: float, rate: float) -> dict:
    max_new = eng.options.max_new_tokens
    eng.warm_up(budget, len(docs))  # as the worker at start: KV pool at the budget, compiled layers, every decode graph
    torch.cuda.synchronize()
    cap0 = eng.runner.capture_s
    torch.cuda.reset_peak_memory_stats()
    before = dict(eng.stats)
    floor_s = 0.0
    out_tokens = 0
    bins = 0
    t0 = time.perf_counter()
    for packer, b in product_bins(docs, budget, max_new):
        steps0 = eng.stats["decode_steps"]
        staged = eng.stage(b.tokens, b.cu_seqlens, b.max_seqlen)
        outs = eng.generate(staged)
        staged.wait_copied()
        packer.release(b.slot)
        bins += 1
        out_tokens += sum(len(o.token_ids) for o in outs)
        steps = eng.stats["decode_steps"] - steps0
        idx = b.seq_ids.tolist()
        kv_rows = sum(len(docs[i]) for i in idx) + len(idx) * max_new / 2  # live rows, averaged over the steps
        floor_s += steps * (fig["weight_bytes_read_per_step"] + kv_rows * eng.pool.bytes_per_row) / bw
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    d = {k: eng.stats[k] - before[k] for k in eng.stats}
    capture_s = eng.runner.capture_s - cap0  # graphs first needed inside the timed run
    step_ms = 1e3 * (d["decode_s"] - capture_s) / max(1, d["decode_steps"])
    floor_ms = 1e3 * floor_s / max(1, d["decode_steps"])
    job_floor = job_floor_s(fig, docs, rate, floor_s)
    return {"wall_s": wall, "output_tokens": out_tokens, "output_tokens_per_s": out_tokens / wall, "bins": bins,
            "prefill_s": d["prefill_s"], "decode_s": d["decode_s"], "decode_steps": d["decode_steps"],
            "decode_step_ms": step_ms, "decode_floor_ms": floor_ms, "decode_vs_floor": step_ms / floor_ms,
            "job_floor_s": job_floor, "prefill_floor_s": job_floor - floor_s, "decode_floor_s": floor_s,
            "wall_vs_job_floor": wall / job_floor,
            "oom_splits": d["oom_splits"], "graph_captures": eng.runner.captures, "graph_capture_s_in_run": capture_s,
            "peak_vram_gib": torch.cuda.max_memory_allocated() / 2**30}


def _log(msg: str, **kv) -> None:
    print(json.dumps({"t": round(time.time(), 1), "msg": msg, **kv}), flush=True)


def run_model(key: str, args, ceil: dict, results: dict, save) -> None:
    t0 = time.perf_counter()
    model = random_model(MODELS[key], torch.device("cuda"), torch.bfloat16)
    fig = model_figures(model)
    _prefill_shape(args.prefill_shape)
    eng = engine_for_model(model, None, attention=args.attention, name=f"qwen2.5-{key}-random",
                           max_new_tokens=args.max_new, chunk_tokens=args.chunk_tokens, compile=args.compile,
                           merge=args.merge, prefill_kernel=args.prefill_kernel)
    eng.eos_ids = tuple(sorted({model.config.eos_token_id}))
    res = results.setdefault(key, {"backend": eng.backend, "compiled_layers": eng.compiled,
                                   "merged_projections": eng.merged, "prefill_kernel": eng.prefill_kernel,
                                   "prefill_shape": args.prefill_shape, "figures": fig,
                                   "load_s": time.perf_counter() - t0})
    budget = autotune_budget(eng, args.max_new, override=args.budget, cache_path=Path(args.out) / "autotune_cache.json")
    res["budget"] = budget
    _log("model ready", model=key, backend=eng.backend, budget=budget)
    for mix in args.mixes:
        docs = make_mix(mix, model.config.vocab_size, n=args.docs)
        lens = [len(d) for d in docs]
        r = res.setdefault(mix, {"docs": len(docs), "tokens": sum(lens)})
        flops = prefill_flops(fig, lens)
        runs = [] if args.skip_hf else [("hf_padded", lambda: _eager(eng, hf.hf_prefill, model, docs))]
        runs += [(f"ribbon_chunk{c}", lambda c=c: ribbon_prefill_at(eng, model, docs, c)) for c in args.prefill_chunks]
        if args.compare_fa2 and eng.prefill_kernel == "triton":  # same run, FlashAttention-2 prefill (not "ribbon*")
            c = max(args.prefill_chunks)
            runs.append((f"fa2_chunk{c}", lambda c=c: ribbon_prefill_at(eng, model, docs, c, "fa2")))
        for name, fn in runs:
            out = fn()
            out["mfu"] = flops / out["wall_s"] / (ceil["bf16_matmul_tflops"] * 1e12)
            r.setdefault("prefill", {})[name] = out
            _log("prefill", model=key, mix=mix, system=name, tok_s=round(out["tokens_per_s"]), mfu=round(out["mfu"], 3))
            save()
        best = max((v for k, v in r["prefill"].items() if k.startswith("ribbon")), key=lambda v: v["tokens_per_s"])
        r["prefill"]["ribbon"] = dict(best)
        save()
        sub = docs[: args.gen_docs[key][args.mixes.index(mix) % len(args.gen_docs[key])]]
        if not sub:
            continue
        g = r.setdefault("generate", {"docs": len(sub), "max_new_tokens": args.max_new})
        systems = [("ribbon", lambda: _ribbon_gen(eng, model, sub, budget, fig, ceil))]
        if args.compare_cublaslt:  # the same job, GEMMs through cuBLASLt (a process-wide torch setting); first,
            # so the profile below replays the graphs "ribbon" captured
            systems.insert(0, ("ribbon_cublaslt", lambda: _ribbon_gen(eng, model, sub, budget, fig, ceil, "cublaslt")))
        if not (args.skip_hf or args.skip_hf_generate):
            systems += [("hf_generate_batch", lambda: _eager(eng, hf.hf_generate_batch, model, sub, args.max_new)),
                        ("hf_generate_padded", lambda: _eager(eng, hf.hf_generate, model, sub, args.max_new))]
        after = []  # after the profile (it replays the graphs "ribbon" captured)
        if args.compare_decode_launch:
            after = [("ribbon_decode_launch", lambda: _ribbon_gen(eng, model, sub, budget, fig, ceil, launch=True,
                                                                  layout="head")),
                     ("ribbon_decode_launch_token", lambda: _ribbon_gen(eng, model, sub, budget, fig, ceil, launch=True,
                                                                        layout="token"))]
        _generate_systems(systems, g, save, key, mix)
        if args.profile:
            r["profile"] = profile_engine(eng, docs, sub, Path(args.out), f"{key}_{mix}", stage_docs)
            save()
        _generate_systems(after, g, save, key, mix)
        if args.full_corpus_generate:
            r["generate_full_corpus_ribbon"] = _ribbon_gen(eng, model, docs, budget, fig, ceil)
            _log("generate full corpus", model=key, mix=mix, wall=r["generate_full_corpus_ribbon"]["wall_s"])
            save()
    eng.free()
    del eng, model
    torch.cuda.empty_cache()


def _generate_systems(systems, g: dict, save, key: str, mix: str) -> None:
    """Run each (name, fn) generation system into g[name]; a system that fails is reported, not fatal."""
    for name, fn in systems:
        try:
            g[name] = fn()
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is reported, not fatal
            g[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        if "wall_s" in g[name] and "ribbon" in g and "job_floor_s" in g["ribbon"]:
            g[name]["wall_vs_job_floor"] = g[name]["wall_s"] / g["ribbon"]["job_floor_s"]  # the same job
        _log("generate", model=key, mix=mix, system=name, wall=g[name].get("wall_s"),
             vs_job_floor=g[name].get("wall_vs_job_floor"))
        save()


def ribbon_prefill_at(eng, model, docs, chunk, kernel: str | None = None):
    model.set_attn_implementation(REGISTERED[eng.backend])  # the engine's own attention again
    saved, eng.options.chunk_tokens = eng.options.chunk_tokens, chunk
    saved_kernel, eng.prefill_kernel = eng.prefill_kernel, kernel or eng.prefill_kernel
    try:
        return ribbon_prefill(eng, docs, chunk)
    finally:
        eng.options.chunk_tokens, eng.prefill_kernel = saved, saved_kernel


def _prefill_shape(shape: str | None) -> None:
    """--prefill-shape bm,bn,warps,stages: the Triton prefill kernel's launch shape for this run
    (bench/engine_kernels.py picks it; the chosen one becomes prefill_kernel.py's default)."""
    if not shape:
        return
    from worker.engine import prefill_kernel as pk  # noqa: PLC0415 triton: optional, CUDA builds only

    pk.BLOCK_M, pk.BLOCK_N, pk.NUM_WARPS, pk.NUM_STAGES = (int(x) for x in shape.split(","))


def _ribbon_gen(eng, model, docs, budget, fig, ceil, blas: str | None = None, launch: bool = False,
                layout: str | None = None):
    """blas: every GEMM of the job through this library; launch: the decode step with the opt-in launch
    choices (the kernel stores K/V on the fused backends, the step under cuBLASLt); layout: the KV pool
    stored this way (kvcache.KVPool.layout) for this job."""
    model.set_attn_implementation(REGISTERED[eng.backend])  # the engine's own attention again
    saved = torch.backends.cuda.preferred_blas_library()
    saved_launch, saved_layout = (eng.write_new, eng.decode_blas), eng.pool.layout
    changed = bool(blas or launch or (layout and layout != saved_layout))
    if blas:
        torch.backends.cuda.preferred_blas_library(blas)
    if launch:
        eng.write_new, eng.decode_blas = want_kv_write("fused", eng.backend), "cublaslt"
    if layout and layout != saved_layout:
        eng.free()  # the pool is allocated again by the job's warm-up, in this layout
        eng.pool.layout = layout
    if changed:
        eng.runner.clear()  # graphs captured with other kernels
    try:
        return ribbon_generate(eng, docs, budget, fig, ceil["copy_bytes_per_s"], ceil["bf16_matmul_tflops"] * 1e12)
    finally:
        if changed:
            torch.backends.cuda.preferred_blas_library(saved)
            eng.write_new, eng.decode_blas = saved_launch
            if eng.pool.layout != saved_layout:
                eng.free()
                eng.pool.layout = saved_layout
            eng.runner.clear()


def _eager(eng, fn, *args):
    """A Hugging Face baseline on the same model object as HF runs it: eager layers, separate projections."""
    if eng.compiled:
        uncompile_layers(eng.base)
    if eng.merged:
        unmerge_projections(eng.base)
    try:
        return fn(*args)
    finally:
        if eng.merged:
            merge_projections(eng.base)
        if eng.compiled:
            compile_layers(eng.base)


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="7b,0.5b", help="comma list of: " + ", ".join(MODELS))
    p.add_argument("--mixes", default=",".join(MIXES), help="comma list of: stress, uniform")
    p.add_argument("--docs", type=int, default=None, help="documents per mix (default: 400 stress, 300 uniform)")
    p.add_argument("--gen-docs", default="7b=96/96,0.5b=96/96",
                   help="per model: first N documents of each mix (in --mixes order) generated by every system")
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--chunk-tokens", type=int, default=32_768, help="Ribbon prefill tokens per forward")
    p.add_argument("--prefill-chunks", default="32768,65536", help="Ribbon prefill-only bin sizes to run")
    p.add_argument("--budget", type=int, default=None, help="token budget (default: Phase-0 autotune)")
    p.add_argument("--attention", default="auto", choices=["auto", "flash_attn", "varlen", "reference"])
    p.add_argument("--compile", default="auto", choices=["auto", "on", "off"], help="compiled decoder layers")
    p.add_argument("--merge", default="auto", choices=["auto", "on", "off"],
                   help="q/k/v and gate/up as one GEMM each (Hugging Face baselines always run unmerged)")
    p.add_argument("--prefill-kernel", default="auto", choices=["auto", "triton", "fa2"],
                   help="prefill attention of the fused backends (EngineOptions.prefill_kernel)")
    p.add_argument("--prefill-shape", default=None, help="Triton prefill launch shape bm,bn,warps,stages")
    p.add_argument("--compare-fa2", action="store_true", help="with Triton prefill, also a FlashAttention-2 prefill row")
    p.add_argument("--compare-cublaslt", action="store_true", help="also the generation job with GEMMs via cuBLASLt")
    p.add_argument("--compare-decode-launch", action="store_true",
                   help="also the generation job with the decode kernel storing K/V, the step under cuBLASLt and a "
                        "head-major KV pool (EngineOptions decode_kv_write=fused, decode_blas=cublaslt, kv_layout=head), "
                        "and the same with a token-major pool")
    p.add_argument("--profile", action="store_true", help="per-kernel profiles of a 32k prefill bin and the generation")
    p.add_argument("--skip-hf", action="store_true", help="Ribbon only")
    p.add_argument("--skip-hf-generate", action="store_true",
                   help="HF prefill baseline only (its generate baselines take ~100 s on 7B and do not change with Ribbon)")
    p.add_argument("--full-corpus-generate", action="store_true", help="also generate for every document with Ribbon")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default="engine_h200.json")
    p.add_argument("--plot", default=None, help="only draw PNGs from this results JSON")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    a.prefill_chunks = [int(c) for c in a.prefill_chunks.split(",") if c]
    a.mixes = [m for m in a.mixes.split(",") if m]
    a.gen_docs = {k: [int(x) for x in v.split("/")] for k, v in (item.split("=") for item in a.gen_docs.split(","))}
    return a


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.plot:
        for path in plot(args.plot, args.out):
            print(path)
        return 0

    if not torch.cuda.is_available():
        print("python -m bench.engine needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version(),
                     "args": {k: v for k, v in vars(args).items()}}

    def save():
        (out / args.name).write_text(json.dumps(results, indent=1, default=str))

    results["ceilings"] = ceil = ceilings()
    _log("ceilings", **ceil)
    save()
    for key in args.models:
        run_model(key, args, ceil, results, save)
    save()
    print(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def greedy_agreement(ref: list[list[int]], other: list[list[int]]) -> dict:
    """Greedy outputs of two engines over the same documents: the share of tokens agreeing up to each
    document's first difference, and how many documents are identical."""
    agree = total = same = 0
    for x, y in zip(ref, other):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        agree, total, same = agree + n, total + max(len(x), len(y), 1), same + (x == y)
    return {"greedy_token_agreement": agree / total, "greedy_identical_docs": f"{same}/{len(ref)}"}
