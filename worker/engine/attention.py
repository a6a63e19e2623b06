"""Attention backends, registered through transformers' AttentionInterface (no model patching).

Each backend is one function with the AttentionInterface signature. It ignores the model's mask
(causality comes from `cu_seqlens`: one causal block per document) and reads an `AttnContext`
passed as the `ribbon` keyword, which transformers forwards unchanged to every attention call.

- prefill: q/k/v of a packed ribbon; k/v are also written into each document's KV slot.
- decode: one new token per document; its k/v are written at the document's next slot row,
  then attention runs over the document's own rows only (no padding to the longest).

Backends: "flash_attn" (flash_attn_varlen_func + our decode kernel), "varlen" (torch's
varlen_attn + a Triton decode kernel), "reference" (exact per-document math, CPU or GPU).
"""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass
from typing import Any

import torch

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
def reference_prefill(q, k, v, cu_host: list[int], scale: float) -> torch.Tensor:
    """Per-document causal attention. q: [T, H, D], k/v: [T, Hkv, D] -> [T, H, D]."""
    out = torch.empty_like(q)
    groups = q.shape[1] // k.shape[1]
    for a, b in zip(cu_host[:-1], cu_host[1:]):
        if b == a:
            continue
        qd = q[a:b].transpose(0, 1)  # [H, L, D]
        kd = k[a:b].transpose(0, 1).repeat_interleave(groups, dim=0)  # [H, L, D]
        vd = v[a:b].transpose(0, 1).repeat_interleave(groups, dim=0)  # [H, L, D]
        od = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=True, scale=scale)
        out[a:b] = od.transpose(0, 1)  # [L, H, D]
    return out


def reference_decode(q, k_cache, v_cache, kv_start, kv_len, scale: float) -> torch.Tensor:
    """q: [B, H, D]; caches [S, Hkv, D]; each row attends its own slot rows -> [B, H, D]."""
    out = torch.empty_like(q)
    groups = q.shape[1] // k_cache.shape[1]
    starts, lens = kv_start.tolist(), kv_len.tolist()
    for i, (s, n) in enumerate(zip(starts, lens)):
        kd = k_cache[s : s + n].transpose(0, 1).repeat_interleave(groups, dim=0).to(q.dtype)  # [H, n, D]
        vd = v_cache[s : s + n].transpose(0, 1).repeat_interleave(groups, dim=0).to(q.dtype)  # [H, n, D]
        w = torch.softmax((q[i].unsqueeze(1) @ kd.transpose(1, 2)).float() * scale, dim=-1)  # [H, 1, n]
        out[i] = (w.to(vd.dtype) @ vd).squeeze(1)  # [H, D]
    return out


# ---------------------------------------------------------------- fused backends ------
@functools.lru_cache(maxsize=1)
def _varlen_fn():
    """torch's varlen_attn and what its signature offers (checked once, never by version string)."""
    from torch.nn.attention.varlen import varlen_attn

    params = inspect.signature(varlen_attn).parameters
    return varlen_attn, "enable_gqa" in params, "is_causal" in params


def varlen_prefill(q, k, v, ctx: AttnContext, scale: float) -> torch.Tensor:
    fn, has_gqa, has_is_causal = _varlen_fn()
    extra: dict[str, Any] = {"is_causal": True} if has_is_causal else {"window_size": (-1, 0)}
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        if has_gqa:
            extra["enable_gqa"] = True
        else:  # torch 2.11: no GQA in varlen_attn, expand kv heads
            k = k.repeat_interleave(groups, dim=1)  # [T, H, D]
            v = v.repeat_interleave(groups, dim=1)  # [T, H, D]
    cu = ctx.cu_seqlens
    return fn(q, k, v, cu, cu, ctx.max_seqlen, ctx.max_seqlen, scale=scale, **extra)


def flash_prefill(q, k, v, ctx: AttnContext, scale: float) -> torch.Tensor:
    from flash_attn import flash_attn_varlen_func

    cu = ctx.cu_seqlens
    return flash_attn_varlen_func(q, k, v, cu, cu, ctx.max_seqlen, ctx.max_seqlen, softmax_scale=scale, causal=True)


def kernel_decode(q, ctx: AttnContext, layer: int, scale: float) -> torch.Tensor:
    from worker.engine.decode_kernel import decode_attention

    return decode_attention(q, ctx.k_cache[layer], ctx.v_cache[layer], ctx.kv_start, ctx.kv_len, scale, ctx.num_splits)


# ---------------------------------------------------------------- interface functions --
def _make(prefill_impl, decode_impl):
    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        ctx = _ctx(kwargs)
        scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
        layer = module.layer_idx
        if ctx.mode == "prefill":
            q, k, v = _unpack(query, key, value)  # [T, H, D], [T, Hkv, D], [T, Hkv, D]
            _write_kv(ctx, layer, k, v)
            out = prefill_impl(q, k, v, ctx, scale)  # [T, H, D]
        else:  # strided views, no copies: the decode kernel takes strides
            _write_kv(ctx, layer, key[0].transpose(0, 1), value[0].transpose(0, 1))  # [B, Hkv, D] each
            out = decode_impl(query[0].transpose(0, 1), ctx, layer, scale)  # [B, H, D]
        return out.unsqueeze(0), None  # [1, T, H, D]

    return attention


def _ref_prefill(q, k, v, ctx, scale):
    return reference_prefill(q, k, v, ctx.cu_host, scale)


def _ref_decode(q, ctx, layer, scale):
    return reference_decode(q, ctx.k_cache[layer], ctx.v_cache[layer], ctx.kv_start, ctx.kv_len, scale)


def _no_mask(*args, **kwargs):
    """Mask entry for our backends: causality is per document from cu_seqlens, so no mask tensor."""
    return None


def register_backends() -> None:
    """Register the three functions and their mask entries (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    fns = {
        "flash_attn": _make(flash_prefill, kernel_decode),
        "varlen": _make(varlen_prefill, kernel_decode),
        "reference": _make(_ref_prefill, _ref_decode),
    }
    for backend, name in REGISTERED.items():
        AttentionInterface.register(name, fns[backend])
        AttentionMaskInterface.register(name, _no_mask)


def flash_attn_available() -> bool:
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        return False
    return True


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def choose_backend(requested: str, device: torch.device) -> str:
    """auto -> flash_attn when importable on CUDA, else varlen on CUDA, else reference."""
    if device.type != "cuda":
        if requested not in ("auto", "reference"):
            raise ValueError(f"model.attention={requested!r} needs a CUDA device; on {device} use auto or reference")
        return "reference"
    if requested == "flash_attn" and not flash_attn_available():
        raise ValueError("model.attention=flash_attn but flash_attn is not importable")
    if requested == "varlen" and not triton_available():
        raise ValueError("model.attention=varlen needs triton for the decode kernel")
    if requested != "auto":
        return requested
    if flash_attn_available() and triton_available():
        return "flash_attn"
    if triton_available():
        return "varlen"
    return "reference"
