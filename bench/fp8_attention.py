"""Per-layer error of FP8 prefill attention (model.fp8_attention) against fp32 attention on the same q/k/v,
collected while an engine prefills (bench/fp8_prefill.py on the GPU, bench/fp8_accuracy.py on the CPU).

`layer_errors(rows)` wraps the attention module's prefill entry for the duration of a `with` block:
- CUDA (the fused backends' Triton path, `attention.triton_prefill`): every call also runs the FP8 kernel
  (prefill_fp8_kernel.py), the bf16 Triton kernel and the fp32 reference on that layer's q/k/v;
- CPU (the reference backend with model.fp8_attention on, `attention.emulated_prefill`): the emulation
  against the fp32 reference, and the share of Q, K, V's rounding (fp32 attention on the dequantized Q, K, V).
The engine's own output is unchanged (whichever kernel its prefill_kernel names). One row per call, in
layer order: relative Frobenius errors over the documents' rows, and the worst document's.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics

import torch

from worker.engine import attention
from worker.engine.fp8_attention import dequantized

MAX_DOCS = 64  # the first documents of a bin (the fp32 reference keeps a [H, L, L] score block per document)


def _rel(y: torch.Tensor, r: torch.Tensor) -> float:
    return ((y.float() - r.float()).norm() / r.float().norm().clamp(min=1e-30)).item()


def _worst(y: torch.Tensor, r: torch.Tensor, cu: list[int]) -> float:
    return max((_rel(y[a:b], r[a:b]) for a, b in itertools.pairwise(cu) if b > a), default=0.0)


def _docs(cu: list[int]) -> list[int]:
    return cu[: MAX_DOCS + 1]


def _cuda_row(q, k, v, cu: list[int], scale: float) -> dict:
    from worker.engine import prefill_fp8_kernel as f8, prefill_kernel as pk  # noqa: PLC0415 CUDA only

    cu = _docs(cu)
    n = cu[-1]
    q, k, v = q[:n], k[:n], v[:n]
    ref = attention.reference_prefill(q.float(), k.float(), v.float(), cu, scale)  # [n, H, D]
    fp8 = f8.prefill_attention_fp8(q, k, v, f8.fp8_tables(cu, n, f8.BLOCK_M, q.device), scale)
    bf16 = pk.prefill_attention(q, k, v, pk.block_table(cu, pk.query_block_m(q.dtype), q.device), scale)
    return {"tokens": n, "fp8_vs_fp32": _rel(fp8, ref), "bf16_vs_fp32": _rel(bf16, ref), "fp8_vs_bf16": _rel(fp8, bf16),
            "fp8_vs_fp32_worst_doc": _worst(fp8, ref, cu), "bf16_vs_fp32_worst_doc": _worst(bf16, ref, cu)}


@contextlib.contextmanager
def layer_errors(rows: list[dict]):
    """Inside the block, every prefill attention call appends its layer's errors to rows (module docstring)."""
    triton_prefill, emulated = attention.triton_prefill, attention.emulated_prefill

    def on_cuda(q, k, v, ctx, scale):
        rows.append({"layer": len(rows)} | _cuda_row(q, k, v, ctx.cu_host, scale))
        return triton_prefill(q, k, v, ctx, scale)

    def on_cpu(q, k, v, cu_host, scale):
        out = emulated(q, k, v, cu_host, scale)  # [T, H, D]
        cu = _docs(cu_host)
        n = cu[-1]
        ref = attention.reference_prefill(q[:n].float(), k[:n].float(), v[:n].float(), cu, scale)
        qd, kd, vd = dequantized(q[:n], k[:n], v[:n], cu)  # Q, K, V rounded as FP8 attention rounds them, P exact
        qkv = attention.reference_prefill(qd, kd, vd, cu, scale)
        rows.append({"layer": len(rows), "tokens": n, "fp8_vs_fp32": _rel(out[:n], ref),
                     "fp8_vs_fp32_worst_doc": _worst(out[:n], ref, cu), "qkv_rounding_only_vs_fp32": _rel(qkv, ref)})
        return out

    attention.triton_prefill, attention.emulated_prefill = on_cuda, on_cpu
    try:
        yield rows
    finally:
        attention.triton_prefill, attention.emulated_prefill = triton_prefill, emulated


def summary(rows: list[dict]) -> dict:
    """The per-layer rows' mean and worst of every error column."""
    keys = [k for k in (rows[0] if rows else {}) if k not in ("layer", "tokens")]
    return {f"{k}_{f.__name__}": f([r[k] for r in rows]) for k in keys for f in (max, statistics.mean)}


# Launch shapes (query rows, key rows, warps, stages) the FP8 kernel is timed at by kernels_alone
ATTN_SHAPES = [(128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 4, 3), (64, 64, 4, 3)]


def time_ms(fn, reps: int = 10) -> float:
    """The median of `reps` CUDA-event timings of fn(), in ms, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return sorted(a.elapsed_time(b) for a, b in ev)[reps // 2]


def _timed(fn, flop: float | None) -> dict:
    ms = time_ms(fn)
    return {"ms": ms} | ({"tflops": flop / (ms * 1e-3) / 1e12} if flop else {})


def kernels_alone(eng, staged) -> dict:
    """The attention kernels alone on layer 0's q/k/v of one prefill of `staged` (copied: contiguous): the bf16
    Triton kernel at its default shape, the FP8 one (its quantization included) at each of ATTN_SHAPES, and the
    FP8 quantization alone. TFLOP/s count the causal work (4 * L * (L + 1) / 2 * H * D per document)."""
    from worker.engine import prefill_fp8_kernel as f8, prefill_kernel as pk  # noqa: PLC0415 CUDA only

    got: dict = {}
    triton_prefill = attention.triton_prefill

    def grab(q, k, v, ctx, scale):
        if not got:
            got.update(qkv=(q.clone(), k.clone(), v.clone()), cu=list(ctx.cu_host), scale=scale)
        return triton_prefill(q, k, v, ctx, scale)

    attention.triton_prefill = grab
    try:
        eng.prefill_last_logits(staged)
    finally:
        attention.triton_prefill = triton_prefill
    (q, k, v), cu, scale = got["qkv"], got["cu"], got["scale"]
    flop = 2.0 * sum((b - a) * (b - a + 1) for a, b in itertools.pairwise(cu)) * q.shape[1] * q.shape[2]
    out: dict = {"tokens": cu[-1], "documents": len(cu) - 1, "heads": q.shape[1], "kv_heads": k.shape[1],
                 "head_dim": q.shape[2], "causal_flop": flop, "errors": {}}
    blocks = pk.block_table(cu, pk.query_block_m(q.dtype), q.device)
    out["bf16"] = _timed(lambda: pk.prefill_attention(q, k, v, blocks, scale), flop)
    tables = f8.fp8_tables(cu, q.shape[0], f8.BLOCK_M, q.device)
    out["fp8_quantize"] = _timed(lambda: f8.quantize_qkv(q, k, v, tables), None)
    for shape in ATTN_SHAPES:
        name = "fp8_" + "x".join(map(str, shape))
        try:
            tables = f8.fp8_tables(cu, q.shape[0], shape[0], q.device)
            out[name] = _timed(lambda t=tables, s=shape: f8.prefill_attention_fp8(q, k, v, t, scale, *s), flop)
        except Exception as e:  # noqa: BLE001 a shape that does not compile must not lose the others
            out["errors"][name] = repr(e)[:300]
    return out
