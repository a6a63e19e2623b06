"""Triton varlen causal attention for packed prefill (GQA native, Hopper-tuned launch shape).

Why our own: the fused varlen kernels that run FlashAttention-3/4-class code on Hopper (FA4's
CuTe kernels, FlashInfer) cannot reach the device (docs/engine.md), and torch 2.11's varlen path
is FlashAttention-2, which issues Ampere `mma.sync` on the H200. Triton lowers `tl.dot` to
Hopper's `wgmma` there.

One program per (query block, query head). The query blocks of a bin come from a block table
built once per forward on the host (`block_table`, shared by every layer): (document start,
block start in the document, document length), heaviest blocks first (a causal block's work
grows with its position), so the long tail of a bin is short blocks. Keys before the block run
unmasked; only the diagonal blocks are masked. Each query head reads its KV head's rows in
place (head // groups): K/V are never expanded. q/k/v may be strided views (unit last stride).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Launch shape, chosen on the H200 by bench/engine_kernels.py (committed JSON): query rows per
# program, key rows per iteration, warps, pipeline stages.
BLOCK_M = 128
BLOCK_N = 64
NUM_WARPS = 8
NUM_STAGES = 3
FP32_SHAPE = (64, 32, 4, 2)  # fp32 tiles take twice the shared memory: a smaller default shape
LOG2E = 1.4426950408889634


@triton.jit
def _prefill_kernel(
    Q, K, V, O, Blocks, qk_scale,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    GROUPS: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr,
):
    pid = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)  # head offsets reach past 2**31 on a [H, T, D] layout of a large T
    base = tl.load(Blocks + pid * 3).to(tl.int64)  # first ribbon row of the document
    m0 = tl.load(Blocks + pid * 3 + 1)  # first query row of the block, in the document
    n = tl.load(Blocks + pid * 3 + 2)  # document length
    g = h // GROUPS
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    mmask = offs_m < n
    q = tl.load(Q + (base + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d[None, :], mask=mmask[:, None],
                other=0.0)
    k_ptr = K + base * stride_kt + g * stride_kh + offs_n[:, None] * stride_kt + offs_d[None, :]
    v_ptr = V + base * stride_vt + g * stride_vh + offs_n[:, None] * stride_vt + offs_d[None, :]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for j in range(0, m0, BLOCK_N):  # keys wholly before the block: no mask (BLOCK_M % BLOCK_N == 0)
        k = tl.load(k_ptr + j * stride_kt)
        if IEEE:
            qk = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        else:
            qk = tl.dot(q, tl.trans(k)) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + j * stride_vt)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    hi = tl.minimum(m0 + BLOCK_M, n)
    for j in range(m0, hi, BLOCK_N):  # the diagonal: causal and length masks
        cols = j + offs_n
        nmask = cols < n
        k = tl.load(k_ptr + j * stride_kt, mask=nmask[:, None], other=0.0)
        if IEEE:
            qk = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        else:
            qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where((cols[None, :] <= offs_m[:, None]) & nmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + j * stride_vt, mask=nmask[:, None], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(O + (base + offs_m)[:, None] * stride_ot + h * stride_oh + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=mmask[:, None])


def block_table(cu_host: list[int], block_m: int, device: torch.device) -> torch.Tensor:
    """int32 [blocks, 3]: (document start, block start in the document, document length) for every
    query block of every non-empty document, heaviest (latest in its document) first."""
    rows = []
    for a, b in zip(cu_host[:-1], cu_host[1:]):
        rows.extend((a, m0, b - a) for m0 in range(0, b - a, block_m))
    rows.sort(key=lambda r: -(r[1] + min(block_m, r[2] - r[1])))  # keys a block attends
    return torch.tensor(rows or [(0, 0, 0)], dtype=torch.int32).to(device, non_blocking=True)


def query_block_m(dtype: torch.dtype) -> int:
    """The default query rows per program for this dtype (what block_table must be built with)."""
    return FP32_SHAPE[0] if dtype == torch.float32 else BLOCK_M


def prefill_attention(q, k, v, blocks: torch.Tensor, scale: float, block_m: int | None = None,
                      block_n: int | None = None, num_warps: int | None = None,
                      num_stages: int | None = None) -> torch.Tensor:
    """q: [T, H, D], k/v: [T, Hkv, D]; blocks: block_table(cu, block_m) with the block_m this call runs
    (query_block_m(q.dtype) for the defaults) -> [T, H, D] contiguous, q's dtype. Rows of no document
    (padding past cu[-1]) are left unwritten."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    t, heads, dim = q.shape
    if q.dtype == torch.float32:
        block_m, block_n, num_warps, num_stages = (a or b for a, b in zip((block_m, block_n, num_warps, num_stages),
                                                                          FP32_SHAPE))
    block_m, block_n = block_m or BLOCK_M, block_n or BLOCK_N
    if block_m % block_n:
        raise ValueError(f"block_m {block_m} must be a multiple of block_n {block_n}")
    out = torch.empty(t, heads, dim, device=q.device, dtype=q.dtype)  # [T, H, D]
    _prefill_kernel[(blocks.shape[0], heads)](
        q, k, v, out, blocks, scale * LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        GROUPS=heads // k.shape[1], D=dim, BLOCK_M=block_m, BLOCK_N=block_n, IEEE=q.dtype == torch.float32,
        num_warps=num_warps or NUM_WARPS, num_stages=num_stages or NUM_STAGES,
    )
    return out
