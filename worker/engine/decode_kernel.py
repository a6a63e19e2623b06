"""Triton decode attention over per-document KV slots (flash-decoding with key splits).

One program per (document, kv head, split): it loads the group's query heads once
([G_PAD, D], GQA) and streams only its own document's rows of the packed KV buffer, so no
cache is padded to the longest. Split results are merged with their log-sum-exp by a second
kernel. Every length is read on the device, so the launch is CUDA-graph safe.

With the step's new K/V rows passed in (`k_new`, `v_new`), the kernel also stores them: a
document's newest row is its last one (`start + len - 1`); the one program whose split holds it
writes it to the cache and takes it from registers, and no program reads that row from memory,
so the store needs no ordering against any load. That replaces two index_copy_ launches per
layer per decode step.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Launch shape, tuned on the H200 by bench/engine_variants.py (committed JSON): key rows per
# program iteration, warps, pipeline stages.
BLOCK_N = 64
NUM_WARPS = 4
NUM_STAGES = 3


@triton.jit
def _decode_kernel(
    Q, K, V, Start, Len, O, LSE, KN, VN, scale,
    stride_qb, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh,
    stride_ob, stride_oh, stride_os, stride_lb, stride_lh, stride_knb, stride_knh, stride_vnb, stride_vnh,
    GROUPS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
    NUM_SPLITS: tl.constexpr, IEEE: tl.constexpr, WRITE_NEW: tl.constexpr,
):
    b = tl.program_id(0)
    g = tl.program_id(1)
    s = tl.program_id(2)
    start = tl.load(Start + b).to(tl.int64)
    k_head = g.to(tl.int64) * stride_kh  # int64: a head-major pool's head stride times g can pass 2**31 elements
    v_head = g.to(tl.int64) * stride_vh
    n = tl.load(Len + b)
    per = tl.cdiv(tl.cdiv(n, NUM_SPLITS), BLOCK) * BLOCK
    lo = s * per
    hi = tl.minimum(lo + per, n)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK)
    heads = g * GROUPS + offs_g
    gmask = offs_g < GROUPS
    q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :], mask=gmask[:, None], other=0.0)
    last = n - 1  # the document's newest row (WRITE_NEW: held in kn/vn, never read from the cache)
    if WRITE_NEW:
        kn = tl.load(KN + b * stride_knb + g * stride_knh + offs_d).to(K.dtype.element_ty)  # [D]
        vn = tl.load(VN + b * stride_vnb + g * stride_vnh + offs_d).to(V.dtype.element_ty)  # [D]
        mine = (offs_d >= 0) & (lo <= last) & (last < hi)  # [D]: this split holds the newest row
        tl.store(K + (start + last) * stride_kn + k_head + offs_d, kn, mask=mine)
        tl.store(V + (start + last) * stride_vn + v_head + offs_d, vn, mask=mine)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for j in range(lo, hi, BLOCK):
        rows = j + offs_n
        nmask = rows < hi
        grow = start + rows.to(tl.int64)
        if WRITE_NEW:
            is_new = rows == last  # [BLOCK]
            lmask = nmask & (rows != last)
            k = tl.load(K + grow[:, None] * stride_kn + k_head + offs_d[None, :], mask=lmask[:, None], other=0.0)
            k = tl.where(is_new[:, None], kn[None, :], k)
        else:
            k = tl.load(K + grow[:, None] * stride_kn + k_head + offs_d[None, :], mask=nmask[:, None], other=0.0)
        if IEEE:
            qk = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            qk = tl.dot(q, tl.trans(k))
        qk = tl.where(nmask[None, :], qk * scale, float("-inf"))  # [G_PAD, BLOCK]
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if WRITE_NEW:
            v = tl.load(V + grow[:, None] * stride_vn + v_head + offs_d[None, :], mask=lmask[:, None], other=0.0)
            v = tl.where(is_new[:, None], vn[None, :], v)
        else:
            v = tl.load(V + grow[:, None] * stride_vn + v_head + offs_d[None, :], mask=nmask[:, None], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    safe_l = tl.where(l_i > 0, l_i, 1.0)
    out = acc / safe_l[:, None]
    lse = tl.where(l_i > 0, m_i + tl.log(safe_l), float("-inf"))
    o_ptr = O + b * stride_ob + heads[:, None] * stride_oh + s * stride_os + offs_d[None, :]
    tl.store(o_ptr, out.to(O.dtype.element_ty), mask=gmask[:, None])
    if NUM_SPLITS > 1:
        tl.store(LSE + b * stride_lb + heads * stride_lh + s, lse, mask=gmask)


@triton.jit
def _combine_kernel(P, LSE, O, stride_pb, stride_ph, stride_ps, stride_lb, stride_lh, stride_ob, stride_oh,
                    S: tl.constexpr, D: tl.constexpr):
    """One program per (document, head): merge S split results by their log-sum-exp."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, S)
    offs_d = tl.arange(0, D)
    lse = tl.load(LSE + b * stride_lb + h * stride_lh + offs_s)  # [S]; split 0 is never empty
    w = tl.exp(lse - tl.max(lse, 0))  # empty splits (-inf) weigh 0
    part = tl.load(P + b * stride_pb + h * stride_ph + offs_s[:, None] * stride_ps + offs_d[None, :])  # [S, D]
    out = tl.sum(part * w[:, None], 0) / tl.sum(w, 0)
    tl.store(O + b * stride_ob + h * stride_oh + offs_d, out.to(O.dtype.element_ty))


def decode_attention(q, k_cache, v_cache, kv_start, kv_len, scale: float, num_splits: int = 1,
                     block: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                     new_kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """q: [B, H, D] (any strides, unit last); k/v_cache: [S, Hkv, D]; kv_start/kv_len: int32 [B] (>= 1)
    -> [B, H, D] contiguous, q's dtype. num_splits: a power of two. new_kv: (k, v) [B, Hkv, D] each,
    the step's new rows: stored at row kv_start + kv_len - 1 of the caches (cast to their dtype) by
    this launch; rows sharing one cache row (padding rows on the scratch row) each attend their own."""
    if q.stride(-1) != 1:
        q = q.contiguous()
    k_new, v_new = new_kv if new_kv is not None else (k_cache, v_cache)  # unused pointers when None
    if new_kv is not None:
        k_new = k_new if k_new.stride(-1) == 1 else k_new.contiguous()
        v_new = v_new if v_new.stride(-1) == 1 else v_new.contiguous()
    bsz, heads, dim = q.shape
    kv_heads = k_cache.shape[1]
    groups = heads // kv_heads
    g_pad = max(16, triton.next_power_of_2(groups))
    out = torch.empty(bsz, heads, dim, device=q.device, dtype=q.dtype)  # [B, H, D]
    if num_splits == 1:
        part, lse = out.unsqueeze(2), out  # the kernel writes the result directly; no LSE needed
    else:
        part = torch.empty(bsz, heads, num_splits, dim, device=q.device, dtype=torch.float32)  # [B, H, S, D]
        lse = torch.empty(bsz, heads, num_splits, device=q.device, dtype=torch.float32)  # [B, H, S]
    _decode_kernel[(bsz, kv_heads, num_splits)](
        q, k_cache, v_cache, kv_start, kv_len, part, lse, k_new, v_new, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
        part.stride(0), part.stride(1), part.stride(2), lse.stride(0), lse.stride(1),
        k_new.stride(0), k_new.stride(1), v_new.stride(0), v_new.stride(1),
        GROUPS=groups, G_PAD=g_pad, D=dim, BLOCK=block or BLOCK_N, NUM_SPLITS=num_splits,
        IEEE=q.dtype == torch.float32, WRITE_NEW=new_kv is not None, num_warps=num_warps or NUM_WARPS,
        num_stages=num_stages or NUM_STAGES,
    )
    if num_splits > 1:
        _combine_kernel[(bsz, heads)](
            part, lse, out, part.stride(0), part.stride(1), part.stride(2), lse.stride(0), lse.stride(1),
            out.stride(0), out.stride(1), S=num_splits, D=dim, num_warps=4,
        )
    return out
