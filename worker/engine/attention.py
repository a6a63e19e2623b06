"""Attention backends, registered through transformers' AttentionInterface (no model patching).

Each backend is one function with the AttentionInterface signature. It ignores the model's mask
(causality comes from `cu_seqlens`: one causal block per document) and reads an `AttnContext`
passed as the `ribbon` keyword, which transformers forwards unchanged to every attention call.

- prefill: q/k/v of a packed ribbon; k/v are also written into each document's KV slot.
- decode: one new token per document; its k/v are written at the document's next slot row,
  then attention runs over the document's own rows only (no padding to the longest).

Backends: "flash_attn" (flash_attn_varlen_func + our decode kernel), "varlen" (torch's
varlen_attn + a Triton decode kernel; GQA without expanded K/V: `enable_gqa` where varlen_attn has
it, else the same FlashAttention-2 kernel through aten), "reference" (exact per-document math, CPU
or GPU; documents or decode rows of similar length batched into one padded SDPA call).
Every interface function is `torch.compiler.disable`d: compiled decoder layers (fuse.py) run it
eagerly.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

from worker.engine.errors import EngineSettingError
from worker.engine.fp8_attention import emulated_prefill

log = logging.getLogger(__name__)

REGISTERED = {"flash_attn": "ribbon_flash_attn", "varlen": "ribbon_varlen", "reference": "ribbon_reference"}


@dataclass
class AttnContext:
    """What one forward pass needs beyond q/k/v. Tensors live on the model's device."""

    mode: str  # "prefill" | "decode"
    k_cache: list[torch.Tensor] | None = None  # per layer [S, Hkv, D]
    v_cache: list[torch.Tensor] | None = None  # per layer [S, Hkv, D]
    cu_seqlens: torch.Tensor | None = None  # prefill: int32 [n+1]
    cu_host: list[int] | None = None  # prefill: the same on the host
    max_seqlen: int = 0  # prefill
    rows: torch.Tensor | None = None  # int64 [T]: KV row written by each token (prefill and decode)
    kv_start: torch.Tensor | None = None  # decode: int32 [B] first row of each document's slot
    kv_len: torch.Tensor | None = None  # decode: int32 [B] rows to attend (new token included)
    num_splits: int = 1  # decode: key splits per (doc, kv head) program
    # decode: the fused backends' decode kernel stores the step's K/V itself (decode_kernel.py); needs
    # rows == kv_start + kv_len - 1 (decode.decode_step builds it so). The reference backend ignores it.
    write_new: bool = False
    prefill_kernel: str = "fa2"  # prefill: "triton" (prefill_kernel.py), "fa2", "fa2_expanded" (measurement only:
    # K/V heads repeated, the torch 2.11 varlen_attn path); FP8 (fp8_attention.py): "triton_fp8"
    # (prefill_fp8_kernel.py), "fp8_emulated" (the reference backend)
    memo: dict = field(default_factory=dict)  # reference backend: index plans shared by every layer


def _write_kv(ctx: AttnContext, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
    """k, v: [T, Hkv, D] -> rows ctx.rows of this layer's cache."""
    if ctx.k_cache is None or ctx.rows is None:
        return
    ctx.k_cache[layer].index_copy_(0, ctx.rows, k.to(ctx.k_cache[layer].dtype))
    ctx.v_cache[layer].index_copy_(0, ctx.rows, v.to(ctx.v_cache[layer].dtype))


def _unpack(query, key, value):
    """[1, H, T, D] (transformers' layout) -> [T, H, D] contiguous."""
    q = query[0].transpose(0, 1).contiguous()  # [T, H, D]
    k = key[0].transpose(0, 1).contiguous()  # [T, Hkv, D]
    v = value[0].transpose(0, 1).contiguous()  # [T, Hkv, D]
    return q, k, v


def _ctx(kwargs: dict[str, Any]) -> AttnContext:
    ctx = kwargs.get("ribbon")
    if not isinstance(ctx, AttnContext):
        raise RuntimeError("ribbon attention backends need an AttnContext passed as ribbon=... to the model forward")
    return ctx


# ---------------------------------------------------------------- reference (exact) ----
# Same math as one causal SDPA per document (prefill) and one softmax(q k^T) v per document
# (decode), in fp32 on CPU, but batched: documents (decode rows) of similar length share one
# padded SDPA call. The index tensors depend only on cu_seqlens / kv_start / kv_len, so they are
# built once per forward and reused by every layer (AttnContext.memo).
PAD_SLACK = 0.1  # a bucket may waste this fraction of its real attention work on padding...
PREFILL_PAD_FREE = 16_384  # ...plus this many (query, key) pairs (prefill) or
DECODE_PAD_FREE = 2_048  # ...key rows (decode): about one call's fixed cost on a CPU


def length_buckets(lengths: list[int], power: int = 2, free: int | None = None) -> list[list[int]]:
    """Indices grouped by similar length (ascending), zero lengths left out.

    Work of a length is length**power (2: causal prefill, 1: decode). A bucket pads to its
    longest: count * longest**power stays within PAD_SLACK of the real work plus `free` (default
    PREFILL_PAD_FREE), so short ones share a call and long ones don't pay for padding to the longest.
    """
    free = PREFILL_PAD_FREE if free is None else free
    order = sorted((n, i) for i, n in enumerate(lengths) if n > 0)
    buckets: list[list[int]] = []
    real = 0
    for n, i in order:
        w = n**power
        if buckets and (len(buckets[-1]) + 1) * w - (real + w) <= PAD_SLACK * (real + w) + free:
            buckets[-1].append(i)
            real += w
        else:
            buckets.append([i])
            real = w
    return buckets


def _prefill_plan(cu_host: list[int], device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]:
    """Per bucket: gather index int64 [m*L] into the ribbon, src int64 [t] (valid padded
    positions), dst int64 [t] (their ribbon rows), and L."""
    starts = cu_host[:-1]
    lengths = [b - a for a, b in itertools.pairwise(cu_host)]
    plan = []
    for bucket in length_buckets(lengths):
        width = max(lengths[i] for i in bucket)
        st = torch.tensor([starts[i] for i in bucket], dtype=torch.int64)  # [m]
        ln = torch.tensor([lengths[i] for i in bucket], dtype=torch.int64)  # [m]
        ar = torch.arange(width, dtype=torch.int64)  # [L]
        valid = (ar[None, :] < ln[:, None]).view(-1)  # [m*L]
        idx = torch.where(ar[None, :] < ln[:, None], st[:, None] + ar[None, :], st[:, None]).view(-1)  # [m*L]
        src = valid.nonzero().squeeze(1)  # [t]
        plan.append((idx.to(device), src.to(device), idx[src].to(device), width))
    return plan


def reference_prefill(q, k, v, cu_host: list[int], scale: float, plan=None) -> torch.Tensor:
    """Per-document causal attention. q: [T, H, D], k/v: [T, Hkv, D] (views are fine) -> [T, H, D].

    Documents are right-padded inside their bucket: causality alone keeps every real query off
    the padding keys (they come after it), and padded queries are dropped.
    """
    if plan is None:
        plan = _prefill_plan(cu_host, q.device)
    heads, kv_heads, dim = q.shape[1], k.shape[1], q.shape[2]
    out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)  # [T, H, D] (rows past cu_host[-1] stay zero)
    for idx, src, dst, width in plan:
        m = idx.numel() // width
        qb = q.index_select(0, idx).view(m, width, heads, dim).transpose(1, 2)  # [m, H, L, D]
        kb = k.index_select(0, idx).view(m, width, kv_heads, dim).transpose(1, 2)  # [m, Hkv, L, D]
        vb = v.index_select(0, idx).view(m, width, kv_heads, dim).transpose(1, 2)  # [m, Hkv, L, D]
        ob = torch.nn.functional.scaled_dot_product_attention(
            qb, kb, vb, is_causal=True, scale=scale, enable_gqa=heads != kv_heads
        )  # [m, H, L, D]
        ob = ob.transpose(1, 2).reshape(m * width, heads, dim)  # [m*L, H, D]
        out.index_copy_(0, dst, ob.index_select(0, src))
    return out


def _decode_plan(kv_start: torch.Tensor, kv_len: torch.Tensor) -> list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]]:
    """Per bucket of rows: row ids int64 [m] (None: every row, in order), gather index int64
    [m*L] into the cache, key mask bool [m, 1, 1, L]."""
    lens = kv_len.tolist()  # one host read per forward (free on CPU)
    buckets = length_buckets(lens, power=1, free=DECODE_PAD_FREE)
    plan = []
    for bucket in buckets:
        width = max(lens[i] for i in bucket)
        rows = None if len(buckets) == 1 else torch.tensor(bucket, dtype=torch.int64, device=kv_len.device)  # [m]
        ln = kv_len.long() if rows is None else kv_len.long().index_select(0, rows)  # [m]
        start = (kv_start.long() if rows is None else kv_start.long().index_select(0, rows))[:, None]  # [m, 1]
        ar = torch.arange(width, dtype=torch.int64, device=kv_len.device)  # [L]
        valid = ar[None, :] < ln[:, None]  # [m, L]
        idx = torch.where(valid, start + ar[None, :], start).view(-1)  # [m*L]
        plan.append((rows, idx, valid[:, None, None, :]))
    return plan


def reference_decode(q, k_cache, v_cache, kv_start, kv_len, scale: float, plan=None) -> torch.Tensor:
    """q: [B, H, D]; caches [S, Hkv, D]; each row attends its own slot rows -> [B, H, D].

    Per bucket of rows of similar length, whole cache rows are gathered (padded to the bucket's
    longest) and one masked SDPA call attends them (GQA in the kernel: no repeated K/V); masked
    keys get exactly zero weight.
    """
    if plan is None:
        plan = _decode_plan(kv_start, kv_len)
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = k_cache.shape[1]
    out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)  # [B, H, D] (kv_len 0 rows stay zero)
    for rows, idx, valid in plan:
        m, width = valid.shape[0], valid.shape[-1]
        qb = q if rows is None else q.index_select(0, rows)  # [m, H, D]
        kd = k_cache.index_select(0, idx).view(m, width, kv_heads, dim).transpose(1, 2).to(q.dtype)  # [m, Hkv, L, D]
        vd = v_cache.index_select(0, idx).view(m, width, kv_heads, dim).transpose(1, 2).to(q.dtype)  # [m, Hkv, L, D]
        ob = torch.nn.functional.scaled_dot_product_attention(
            qb[:, :, None, :], kd, vd, attn_mask=valid, scale=scale, enable_gqa=heads != kv_heads
        )[:, :, 0]  # [m, H, D]
        if rows is None:
            return ob
        out.index_copy_(0, rows, ob)
    return out


# ---------------------------------------------------------------- fused backends ------
@functools.lru_cache(maxsize=1)
def _varlen_fn():
    """torch's varlen_attn and what its signature offers (checked once, never by version string)."""
    from torch.nn.attention.varlen import varlen_attn  # noqa: PLC0415 optional: torch >= 2.11 only

    params = inspect.signature(varlen_attn).parameters
    return varlen_attn, "enable_gqa" in params, "is_causal" in params


def flash_gqa(q, k, v, cu: torch.Tensor, max_seqlen: int, scale: float) -> torch.Tensor:
    """FlashAttention-2 varlen through aten, K/V heads not expanded: the kernel maps each query head
    to its KV head itself (what varlen_attn(enable_gqa=True) calls on torch >= 2.12)."""
    return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max_seqlen, max_seqlen, 0.0, True, False,
                                                   scale=scale)[0]  # [T, H, D]


def varlen_prefill(q, k, v, ctx: AttnContext, scale: float) -> torch.Tensor:
    fn, has_gqa, has_is_causal = _varlen_fn()
    cu = ctx.cu_seqlens
    groups = q.shape[1] // k.shape[1]
    expand = ctx.prefill_kernel == "fa2_expanded"
    if groups > 1 and not has_gqa and not expand:
        return flash_gqa(q, k, v, cu, ctx.max_seqlen, scale)
    extra: dict[str, Any] = {"is_causal": True} if has_is_causal else {"window_size": (-1, 0)}
    if groups > 1:
        if has_gqa and not expand:
            extra["enable_gqa"] = True
        else:  # measurement only (fa2_expanded): what torch 2.11's varlen_attn needed
            k = k.repeat_interleave(groups, dim=1)  # [T, H, D]
            v = v.repeat_interleave(groups, dim=1)  # [T, H, D]
    return fn(q, k, v, cu, cu, ctx.max_seqlen, ctx.max_seqlen, scale=scale, **extra)


def flash_prefill(q, k, v, ctx: AttnContext, scale: float) -> torch.Tensor:
    from flash_attn import flash_attn_varlen_func  # noqa: PLC0415 optional dependency (flash-attn)

    cu = ctx.cu_seqlens
    return flash_attn_varlen_func(q, k, v, cu, cu, ctx.max_seqlen, ctx.max_seqlen, softmax_scale=scale, causal=True)


def triton_prefill(q, k, v, ctx: AttnContext, scale: float) -> torch.Tensor:
    """Our Triton varlen kernel (prefill_kernel.py, or its FP8 form prefill_fp8_kernel.py) on strided views;
    the block table is built by the first layer of a forward and reused by the others."""
    from worker.engine import prefill_fp8_kernel as f8, prefill_kernel as pk  # noqa: PLC0415 triton: optional

    if ctx.prefill_kernel == "triton_fp8":
        return f8.triton_fp8_prefill(q, k, v, ctx.cu_host, scale, ctx.memo)  # [T, H, D]
    if "blocks" not in ctx.memo:
        ctx.memo["blocks"] = pk.block_table(ctx.cu_host, pk.query_block_m(q.dtype), q.device)
    return pk.prefill_attention(q, k, v, ctx.memo["blocks"], scale)  # [T, H, D]


def kernel_decode(q, ctx: AttnContext, layer: int, scale: float, new_kv=None) -> torch.Tensor:
    """new_kv: (k, v) [B, Hkv, D] of this step, stored by the kernel itself (else already in the cache)."""
    from worker.engine.decode_kernel import decode_attention  # noqa: PLC0415 triton: optional, CUDA only

    return decode_attention(q, ctx.k_cache[layer], ctx.v_cache[layer], ctx.kv_start, ctx.kv_len, scale, ctx.num_splits,
                            new_kv=new_kv)


# ---------------------------------------------------------------- interface functions --
def _make(prefill_impl, decode_impl):
    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        ctx = _ctx(kwargs)
        scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
        layer = module.layer_idx
        if ctx.mode == "prefill" and ctx.prefill_kernel in ("triton", "triton_fp8"):  # strided views: no copies
            q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # [T, H, D], [T, Hkv, D] x 2
            _write_kv(ctx, layer, k, v)
            out = triton_prefill(q, k, v, ctx, scale)  # [T, H, D]
        elif ctx.mode == "prefill":
            q, k, v = _unpack(query, key, value)  # [T, H, D], [T, Hkv, D], [T, Hkv, D]
            _write_kv(ctx, layer, k, v)
            out = prefill_impl(q, k, v, ctx, scale)  # [T, H, D]
        else:  # strided views, no copies: the decode kernel takes strides
            k, v = key[0].transpose(0, 1), value[0].transpose(0, 1)  # [B, Hkv, D] each
            if ctx.write_new:  # the kernel stores them: no index_copy_ launches
                out = decode_impl(query[0].transpose(0, 1), ctx, layer, scale, (k, v))  # [B, H, D]
            else:
                _write_kv(ctx, layer, k, v)
                out = decode_impl(query[0].transpose(0, 1), ctx, layer, scale)  # [B, H, D]
        return out.unsqueeze(0), None  # [1, T, H, D]

    return torch.compiler.disable(attention)  # compiled layers (fuse.py) call it eagerly: one graph break


def _reference_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The reference backend: strided views in (no q/k/v copies), index plans built by the first
    layer of a forward and reused by the others."""
    ctx = _ctx(kwargs)
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    layer = module.layer_idx
    q = query[0].transpose(0, 1)  # [T, H, D] view
    k = key[0].transpose(0, 1)  # [T, Hkv, D] view
    v = value[0].transpose(0, 1)  # [T, Hkv, D] view
    _write_kv(ctx, layer, k, v)
    if ctx.mode == "prefill" and ctx.prefill_kernel == "fp8_emulated":  # fp8_attention.py's fp32 emulation
        out = emulated_prefill(q, k, v, ctx.cu_host, scale)  # [T, H, D]
    elif ctx.mode == "prefill":
        if "prefill" not in ctx.memo:
            ctx.memo["prefill"] = _prefill_plan(ctx.cu_host, q.device)
        out = reference_prefill(q, k, v, ctx.cu_host, scale, ctx.memo["prefill"])  # [T, H, D]
    else:
        if "decode" not in ctx.memo:
            ctx.memo["decode"] = _decode_plan(ctx.kv_start, ctx.kv_len)
        out = reference_decode(q, ctx.k_cache[layer], ctx.v_cache[layer], ctx.kv_start, ctx.kv_len, scale,
                               ctx.memo["decode"])  # [B, H, D]
    return out.unsqueeze(0), None  # [1, T, H, D]


def _no_mask(*args, **kwargs):
    """Mask entry for our backends: causality is per document from cu_seqlens, so no mask tensor."""
    return


def register_backends() -> None:
    """Register the three functions and their mask entries (idempotent)."""
    fns = {
        "flash_attn": _make(flash_prefill, kernel_decode),
        "varlen": _make(varlen_prefill, kernel_decode),
        "reference": torch.compiler.disable(_reference_attention),
    }
    for backend, name in REGISTERED.items():
        AttentionInterface.register(name, fns[backend])
        AttentionMaskInterface.register(name, _no_mask)


def flash_attn_available() -> bool:
    try:
        import flash_attn  # noqa: F401, PLC0415 probe of an optional dependency
    except ImportError:
        return False
    return True


def triton_available() -> bool:
    try:
        import triton  # noqa: F401, PLC0415 probe of an optional dependency
    except ImportError:
        return False
    return True


def varlen_available() -> bool:
    """torch.nn.attention.varlen.varlen_attn exists (torch >= 2.11; the fused prefill path needs it)."""
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401, PLC0415 probe: torch >= 2.11 only
    except ImportError:
        return False
    return True


PREFILL_KERNELS = ("auto", "triton", "fa2", "fa2_expanded")


def want_prefill_kernel(requested: str, device: torch.device, backend: str, head_dim: int, dtype: torch.dtype) -> str:
    """Prefill attention of the fused backends: auto -> our Triton kernel (measured faster than FA2 on
    the H200, docs/engine.md) where it applies (CUDA, Triton, a power-of-two head size 16..256), else
    FlashAttention-2. The reference backend has its own prefill ("fa2" here means: not ours)."""
    if requested not in PREFILL_KERNELS:
        raise EngineSettingError("prefill_kernel", f"{requested!r} is not one of {PREFILL_KERNELS}", "auto")
    fits = (device.type == "cuda" and backend != "reference" and triton_available()
            and 16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0
            and dtype in (torch.bfloat16, torch.float16, torch.float32))
    if requested == "triton" and not fits:
        raise EngineSettingError("prefill_kernel", f"triton needs CUDA, Triton, a fused backend and a power-of-two "
                                 f"head size (device {device}, backend {backend}, head size {head_dim})", "auto")
    if requested == "auto":
        return "triton" if fits else "fa2"
    return requested


def choose_backend(requested: str, device: torch.device) -> str:
    """auto -> flash_attn when importable on CUDA, else varlen when torch has varlen_attn, else reference.

    Each choice is checked against what is installed (Triton for the decode kernel, flash_attn or
    torch's varlen_attn for prefill), so a bad pick fails here, at start, not in the first bin.
    """
    if device.type != "cuda":
        if requested not in ("auto", "reference"):
            raise EngineSettingError("engine.attention", f"{requested!r} needs a CUDA device (here {device})",
                                     "auto or reference")
        return "reference"
    if requested == "flash_attn" and not (flash_attn_available() and triton_available()):
        raise EngineSettingError("engine.attention", "flash_attn needs flash_attn and triton importable",
                                 "auto, varlen or reference")
    if requested == "varlen" and not (varlen_available() and triton_available()):
        raise EngineSettingError("engine.attention", f"varlen needs torch.nn.attention.varlen (torch >= 2.11; this is "
                                 f"{torch.__version__}) and triton", "auto, flash_attn or reference")
    if requested != "auto":
        return requested
    if flash_attn_available() and triton_available():
        return "flash_attn"
    if varlen_available() and triton_available():
        return "varlen"
    return "reference"
