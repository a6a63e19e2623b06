"""FP8 prefill against bf16 on one GPU: Qwen2.5-7B architecture (random weights), the stress mix.

    python -m bench.fp8_prefill --out $OUT [--model 7b] [--chunk 65536] [--big-chunk 131072]
        [--variants all] [--acc-docs 128] [--gen-docs 32] [--gen-tokens 64]

One engine (merged GEMMs, compiled layers, Triton prefill attention, as in production); in one run:
- GEMMs alone: each GEMM shape of a decoder layer at --chunk rows, bf16 against FP8 with row-wise
  scales (fast accumulation off and on) and tensor-wise scales: TFLOP/s, and each FP8 GEMM's error
  against the same quantized operands multiplied in fp32 (what fast accumulation costs by itself);
- prefill of the whole mix in bf16, then with the same layers' GEMMs in FP8 (worker/engine/fp8.py) in
  each variant of VARIANTS (fast accumulation, the bias in the GEMM, quantization math, the MLP's
  SiLU-multiply and quantization in one kernel: fp8_kernel.py), then the fastest FP8 variant and bf16
  at --big-chunk tokens per bin;
- each variant's accuracy against bf16 at the last position of the first --acc-docs documents: mean
  |logit difference| (also over the mean |logit|, and against the variant without fast accumulation),
  top-1 agreement; greedy agreement of --gen-docs documents over --gen-tokens tokens for the code's
  default variant (decode is bf16 in both: FP8 changes the prefill's KV and first token). Random
  weights give logits without a dominant token, so top-1 and greedy agreement say little here; real
  weights: bench/fp8_accuracy.py;
- FP8 attention (model.fp8_attention: prefill_fp8_kernel.py) on top of the default variant, side by side
  with it: tok/s, accuracy, greedy agreement, each layer's attention error against fp32 attention on one
  bin's q/k/v (bench/fp8_attention.py) and, with --attn-shapes, the attention kernels alone on layer 0's
  q/k/v of that bin (bf16 and FP8 at each launch shape of ATTN_SHAPES, the FP8 quantization alone);
  `--variants attention` runs only these two (the `fp8-attention` stage of bench/device_run.sh);
- the quantization kernels (`--variants kernels`, the `fp8-kernels` stage): the default variant, then the
  row-quantization op at q/k/v and o_proj (fp8_quant_kernel.py), at every GEMM, and with the chunked
  SiLU-multiply-quantize launch (KERNELS; `all` leaves them out; each profile gives the kernels' time
  per call), and before them the kernels alone at the bin's shapes (bench/fp8_quant.py);
- a kernel profile of one bin in bf16 and in each FP8 variant (CUDA time per token by kind).
Writes fp8_prefill_<gpu>.json (after every step, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn

from bench.engine import MODELS, first_bin, ribbon_prefill_at, stage_docs, greedy_agreement, make_mix
from bench.engine_profile import profile
from bench.fp8_attention import kernels_alone, layer_errors, summary, time_ms
from bench.fp8_quant import quant_kernels_alone
from worker.engine.fp8 import FP8, FP8_MAX, QUANT_KERNEL_SITES, fp8_gemms, fp8_mlps, quantize_layers, quantize_rows
from worker.engine.loader import engine_for_model, random_model
from worker.engine.merge import Merged

# name -> the attributes every Fp8Gemm gets and every Fp8Mlp's kernel (fp8.py); "fp8" is the plain path:
# cuBLAS's fp32 promotion, bias added after the GEMM, activations divided in fp32, inductor's fusion of the
# MLP's SiLU-multiply with the quantization of down_proj's input
_FAST = {"fast_accum": True, "bias_in_gemm": True, "quant": "fp32"}
VARIANTS = {
    "fp8": {"fast_accum": False, "bias_in_gemm": False, "quant": "fp32", "mlp_kernel": "none"},
    "fp8+fast_accum": {"fast_accum": True, "bias_in_gemm": False, "quant": "fp32", "mlp_kernel": "none"},
    "fp8+fast_accum+bias_in_gemm": _FAST | {"mlp_kernel": "none"},
    "fp8+fast_accum+bias_in_gemm+native_quant": _FAST | {"quant": "native", "mlp_kernel": "none"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_two_pass": _FAST | {"mlp_kernel": "two_pass"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass": _FAST | {"mlp_kernel": "one_pass"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+fp8_attention": _FAST | {"mlp_kernel": "one_pass",
                                                                               "fp8_attention": True},
    # quant_kernel: Fp8Gemm.quant "kernel" (fp8_quant_kernel.py) at fp8.QUANT_KERNEL_SITES ("sites": q/k/v, o_proj)
    # or at every Fp8Gemm ("all": gate/up too, splitting inductor's add+RMSNorm+quantization kernel)
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel": _FAST | {"mlp_kernel": "one_pass",
                                                                              "quant_kernel": "sites"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel_all": _FAST | {"mlp_kernel": "one_pass",
                                                                                  "quant_kernel": "all"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked": _FAST | {"mlp_kernel": "chunked"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel": _FAST | {"mlp_kernel": "chunked",
                                                                             "quant_kernel": "sites"},
    "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel+fp8_attention": _FAST | {
        "mlp_kernel": "chunked", "quant_kernel": "sites", "fp8_attention": True},
}
ATTENTION = "+fp8_attention"  # the suffix of a variant with FP8 attention
# --variants kernels: the default and the quantization kernels, each choice one step from another variant of
# the group (one_pass without and with quant_kernel, quant_kernel_all against quant_kernel, chunked against
# one_pass with quant_kernel)
KERNELS = ("fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass",
           "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel",
           "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel_all",
           "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel")
# --variants all leaves the quantization kernels' other variants to `kernels` (the fp8 stage stays within its call)
NOT_IN_ALL = ("fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel",
              "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel_all",
              "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked")


def variant_names(spec: str, default: str) -> list[str]:
    """--variants -> names of VARIANTS: all (but NOT_IN_ALL), default, attention (default without and with FP8
    attention), kernels (the default, then KERNELS) or a list."""
    if spec == "all":
        return [n for n in VARIANTS if n not in NOT_IN_ALL]
    if spec in ("default", "attention"):
        return [default] + ([default + ATTENTION] if spec == "attention" else [])
    if spec == "kernels":
        return [default] + [n for n in KERNELS if n != default]
    return spec.split(",")


def current_variant(gemms, mlps) -> dict:
    """The variant the engine's FP8 modules are set to (as a VARIANTS value): what the code's defaults give."""
    plain = [g for g in gemms if g.site not in QUANT_KERNEL_SITES] or gemms
    out = {k: getattr(plain[0], k) for k in VARIANTS["fp8"] if k != "mlp_kernel"}
    out["mlp_kernel"] = mlps[0].kernel if mlps else "none"
    at = {g.site in QUANT_KERNEL_SITES for g in gemms if g.quant == "kernel"}
    if at:
        out["quant"] = "fp32"
        out["quant_kernel"] = "all" if at == {True, False} else "sites"
    return out


def _apply(eng, gemms, mlps, variant: dict, kernel: str) -> None:
    """Set a variant on the engine's FP8 modules; kernel: the engine's prefill kernel without FP8 attention."""
    for g in gemms:
        for k, v in variant.items():
            if k not in ("mlp_kernel", "fp8_attention", "quant_kernel"):
                setattr(g, k, v)
        at = variant.get("quant_kernel")
        if at == "all" or (at == "sites" and g.site in QUANT_KERNEL_SITES):
            g.quant = "kernel"
    for m in mlps:
        m.kernel = variant["mlp_kernel"]
    if variant.get("fp8_attention") and kernel != "triton":
        raise RuntimeError(f"FP8 attention needs the Triton prefill kernel (here {kernel})")
    eng.prefill_kernel = "triton_fp8" if variant.get("fp8_attention") else kernel


def _logits(eng, docs):
    out = []
    for i in range(0, len(docs), 64):
        out.append(eng.prefill_last_logits(stage_docs(eng, docs, list(range(i, min(i + 64, len(docs)))))))
    torch.cuda.synchronize()
    return torch.cat(out)  # [n, V] float32


def _greedy(eng, docs):
    return [o.token_ids for o in eng.generate(stage_docs(eng, docs, list(range(len(docs)))))]


def _accuracy(lb: torch.Tensor, lf: torch.Tensor, base: torch.Tensor | None) -> dict:
    diff = (lb - lf).abs()
    out = {"mean_abs_logit_diff": diff.mean().item(), "mean_abs_logit_bf16": lb.abs().mean().item(),
           "relative": (diff.mean() / lb.abs().mean()).item(), "max_abs_logit_diff": diff.max().item(),
           "top1_agreement_last_position": (lb.argmax(-1) == lf.argmax(-1)).float().mean().item()}
    if base is not None:  # against the variant without fast accumulation: its own share of the difference
        out["mean_abs_logit_diff_vs_fp8"] = (base - lf).abs().mean().item()
    return out


def gemm_bench(layer: nn.Module, m: int) -> dict:
    """Each GEMM of one decoder layer (merged ones as one) at m rows; random activations of unit scale."""
    g = torch.Generator(device="cuda").manual_seed(0)
    out = {name: _one_gemm(mod.weight.detach(), m, g) for name, mod in layer.named_modules()
           if isinstance(mod, (nn.Linear, Merged))}
    torch.cuda.empty_cache()
    return out


def _one_gemm(w: torch.Tensor, m: int, g: torch.Generator) -> dict:
    n, k = w.shape  # [N, K]
    x = torch.randn(m, k, device="cuda", dtype=w.dtype, generator=g)  # [M, K]
    a, sa = quantize_rows(x)  # [M, K], [M, 1]
    wq, sw = quantize_rows(w)  # [N, K], [N, 1]
    sw_row = sw.t().contiguous()  # [1, N]
    ta = (x.abs().amax().float() / FP8_MAX).reshape(())
    tw = (w.abs().amax().float() / FP8_MAX).reshape(())
    at, wt = (x.float() / ta).to(FP8), (w.float() / tw).to(FP8)
    rows = {"bf16": lambda: nn.functional.linear(x, w),
            "fp8_rowwise": lambda: torch._scaled_mm(a, wq.t(), scale_a=sa, scale_b=sw_row, out_dtype=w.dtype),
            "fp8_rowwise_fast_accum": lambda: torch._scaled_mm(a, wq.t(), scale_a=sa, scale_b=sw_row,
                                                               out_dtype=w.dtype, use_fast_accum=True),
            "fp8_tensorwise_fast_accum": lambda: torch._scaled_mm(at, wt.t(), scale_a=ta, scale_b=tw,
                                                                  out_dtype=w.dtype, use_fast_accum=True)}
    flop = 2.0 * m * n * k
    res = {"n": n, "k": k, "m": m}
    for key, fn in rows.items():
        res[f"{key}_tflops"] = flop / (time_ms(fn) * 1e-3) / 1e12
    s = slice(0, min(m, 2_048))  # errors on the first rows: fp32 references of [rows, N]
    exact = (a[s].float() @ wq.float().t()) * sa[s] * sw_row  # the quantized operands, fp32 math
    full = x[s].float() @ w.float().t()
    for key in ("fp8_rowwise", "fp8_rowwise_fast_accum"):
        y = rows[key]()[s].float()
        res[f"{key}_err_vs_exact_fp8"] = ((y - exact).norm() / exact.norm()).item()
        res[f"{key}_err_vs_bf16_operands"] = ((y - full).norm() / full.norm()).item()
    return res


def _kinds(prof: dict, tokens: int) -> dict:
    """CUDA time per token by kind of kernel, from profile()'s top kernels (the rest: other)."""
    us = {"gemm": 0.0, "attention": 0.0, "elementwise": 0.0}
    for k in prof["top"]:
        name = k["name"]
        if "prefill_kernel" in name or "prefill_fp8" in name or "flash" in name or "attn" in name:  # attn_quant too
            kind = "attention"
        elif "nvjet" in name or "gemm" in name.lower() or "xmma" in name or "cutlass" in name:
            kind = "gemm"
        elif name.startswith("triton_") or "silu_mul_quant" in name or "quant_rows" in name:  # inductor's, ours
            kind = "elementwise"
        else:
            continue
        us[kind] += k["us"]
    us["other"] = prof["kernel_us_total"] - sum(us.values())
    return {f"{k}_us_per_token": v / tokens for k, v in us.items()} | {
        "kernel_us_per_token": prof["kernel_us_total"] / tokens, "wall_s": prof["wall_s"],
        "top": prof["top"][:12]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="7b", choices=["7b", "0.5b"])
    ap.add_argument("--chunk", type=int, default=65_536, help="prefill tokens per bin / forward")
    ap.add_argument("--big-chunk", type=int, default=131_072, help="the fastest variant and bf16 again at this "
                                                                   "bin size (0: not)")
    ap.add_argument("--variants", default="all", help="comma-separated names of VARIANTS, 'default' (the code's "
                                                      "default variant only), 'attention' (the default variant "
                                                      "without and with FP8 attention), 'kernels' (the default, then "
                                                      "KERNELS) or 'all' (but the quantization kernels')")
    ap.add_argument("--attn-shapes", action="store_true", help="the attention kernels alone at each launch shape")
    ap.add_argument("--name", default=None, help="the JSON's file name (default fp8_prefill_<gpu>.json)")
    ap.add_argument("--acc-docs", type=int, default=128)
    ap.add_argument("--gen-docs", type=int, default=32)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--no-gemms", action="store_true", help="skip the GEMMs-alone table")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: a smoke run of this script's logic
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    dev = torch.device(a.device)
    model = random_model(MODELS[a.model], dev, torch.bfloat16)
    eng = engine_for_model(model, None, name=f"qwen2.5-{a.model}-random", max_new_tokens=a.gen_tokens,
                           chunk_tokens=a.chunk)
    eng.eos_ids = ()  # random weights: every document runs gen_tokens
    docs = make_mix("stress", model.config.vocab_size)
    acc_docs, one_bin = docs[: a.acc_docs], first_bin(docs, a.chunk, 0)
    bin_tokens = sum(len(docs[i]) for i in one_bin)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "model": f"qwen2.5-{a.model} (random weights)",
           "mix": "stress (400 documents: 60-175 and 2,420-2,660 tokens alternating)", "tokens": sum(map(len, docs)),
           "chunk_tokens": a.chunk, "compiled_layers": eng.compiled, "merged": eng.merged,
           "prefill_kernel": eng.prefill_kernel, "variants": VARIANTS, "prefill": {}, "accuracy": {}, "errors": {},
           "accuracy_docs": len(acc_docs), "greedy_docs": a.gen_docs, "greedy_tokens": a.gen_tokens,
           "greedy_note": "random weights: logits without a dominant token, so top-1 and greedy agreement are "
                          "near chance for any perturbation; real weights: fp8_accuracy_cpu.json",
           "command": "python -m bench.fp8_prefill " + " ".join(argv if argv is not None else sys.argv[1:])}
    out = Path(a.out) / (a.name or f"fp8_prefill_{'h200' if 'H200' in res['gpu'] else 'gpu'}.json")

    def save():
        out.write_text(json.dumps(res, indent=1))

    def prefill(name: str, chunk: int) -> None:
        try:
            best = ribbon_prefill_at(eng, model, docs, chunk)  # after its own warm-up bin
        except Exception as e:  # noqa: BLE001 one variant failing must not lose the others' figures
            res["errors"][f"{name}@{chunk}"] = repr(e)[:500]
            print(f"{name} @ {chunk}: {e!r}", file=sys.stderr)
            save()
            return
        res["prefill"][f"{name}@{chunk}"] = best | {"variant": name, "chunk_tokens": chunk}
        print(f"{name} @ {chunk}: prefill {best['tokens_per_s']:,.0f} tok/s ({best['wall_s']:.2f} s, "
              f"{best['bins']} bins)", file=sys.stderr)
        save()

    def guarded(tag: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 a side measurement failing must not lose the prefill figures
            res["errors"][tag] = repr(e)[:500]
            print(f"{tag}: {e!r}", file=sys.stderr)
        save()

    def prof(tag: str) -> None:
        p = profile(lambda: eng.prefill_last_logits(stage_docs(eng, docs, one_bin)), Path(a.out) / f"fp8_profile_{tag}.txt")
        res.setdefault("profile_one_bin", {"tokens": bin_tokens})[tag] = _kinds(p, bin_tokens)

    def attention_errors(bin_docs) -> None:
        rows: list[dict] = []
        with layer_errors(rows):
            eng.prefill_last_logits(stage_docs(eng, docs, bin_docs))
        res["attention_errors"] = {"summary": summary(rows), "layers": rows,
                                   "note": "random weights: q/k/v without the outlier channels of trained models; "
                                           "real weights: fp8_accuracy_cpu.json (emulated)"}

    def gemms() -> None:
        t0 = time.perf_counter()
        res["gemms"] = gemm_bench(eng.base.layers[0], a.chunk)
        res["gemms_s"] = time.perf_counter() - t0

    if not a.no_gemms:
        guarded("gemms", gemms)

    prefill("bf16", a.chunk)
    lb = _logits(eng, acc_docs)
    gb = _greedy(eng, docs[: a.gen_docs])
    guarded("profile bf16", lambda: prof("bf16"))
    if a.big_chunk:
        prefill("bf16", a.big_chunk)

    t0 = time.perf_counter()
    res["fp8_gemms"] = quantize_layers(eng.base, dev)
    eng.free()  # decode graphs are recaptured around the new modules
    res["fp8_quantize_s"] = time.perf_counter() - t0
    modules, mlps = fp8_gemms(eng.base), fp8_mlps(eng.base)
    res["fp8_mlps"] = len(mlps)
    default = current_variant(modules, mlps)
    res["default_variant"] = next((n for n, v in VARIANTS.items() if v == default), json.dumps(default))
    names = variant_names(a.variants, res["default_variant"])
    if set(names) & set(KERNELS):  # the quantization kernels alone first: a call cut short keeps them
        cfg = model.config
        guarded("quantization kernels", lambda: res.update(quant_kernels=quant_kernels_alone(
            a.chunk, cfg.hidden_size, cfg.intermediate_size)))
    base_logits, kernel = None, eng.prefill_kernel
    for name in names:
        try:
            _apply(eng, modules, mlps, VARIANTS[name], kernel)
        except (RuntimeError, KeyError) as e:
            res["errors"][name] = repr(e)[:500]
            continue
        prefill(name, a.chunk)
        if f"{name}@{a.chunk}" not in res["prefill"]:
            continue
        lf = _logits(eng, acc_docs)
        if name == "fp8":
            base_logits = lf
        res["accuracy"][name] = _accuracy(lb, lf, base_logits if name != "fp8" else None)
        if name == res["default_variant"] or name.endswith(ATTENTION):
            res["accuracy"][name] |= greedy_agreement(gb, _greedy(eng, docs[: a.gen_docs]))
        guarded(f"profile {name}", lambda n=name: prof(n))
        if name.endswith(ATTENTION):
            guarded("attention errors", lambda: attention_errors(one_bin))
            if a.attn_shapes:
                guarded("attention kernels", lambda: res.update(attention_kernels=kernels_alone(eng, stage_docs(
                    eng, docs, one_bin))))
    for with_attention in (False, True):  # the fastest FP8 variant without FP8 attention and with it, at big_chunk
        runs = [v for v in res["prefill"].values() if v["variant"] != "bf16"
                and v["variant"].endswith(ATTENTION) == with_attention]
        if runs and a.big_chunk:
            best = max(runs, key=lambda r: r["tokens_per_s"])["variant"]
            _apply(eng, modules, mlps, VARIANTS[best], kernel)
            prefill(best, a.big_chunk)
    bf16 = res["prefill"].get(f"bf16@{a.chunk}", {}).get("tokens_per_s")
    res["summary"] = {k: {"tokens_per_s": v["tokens_per_s"], "speedup_vs_bf16": v["tokens_per_s"] / bf16 if bf16 else None}
                      for k, v in res["prefill"].items()}
    save()
    print(json.dumps({"summary": res["summary"], "accuracy": res["accuracy"], "default": res["default_variant"]},
                     indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
