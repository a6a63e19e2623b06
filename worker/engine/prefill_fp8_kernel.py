"""FP8 varlen causal attention for packed prefill: prefill_kernel.py's kernel reading e4m3 Q, K and V
(FlashAttention-3's FP8 scheme, in Triton: `tl.dot` of e4m3 operands lowers to Hopper's FP8 `wgmma`).

Quantization (`quantize_qkv`: one Triton launch for V's per-document amax, one for Q, K and V's cast):
- Q: one scale per (token, head), K: one per (token, KV head) (row amax / 448). Q's scale folds into the
  softmax scale of its row, K's multiplies the columns of the score tile: S = (Q8 K8^T) * sq * sk.
- V: one scale per (document, KV head, channel) (the channel's amax over the document / 448), folded into
  the output (O[:, d] = sv[d] * sum_j P[:, j] V8[j, d]); per document, so that a document's attention
  never depends on its bin-mates. V8 is stored transposed, [Hkv, D, Tp] with the token stride 1:
  Hopper's FP8 `wgmma` takes its B operand K-major, and the K of P·V is the token.
- P = exp2(S - running max) lies in [0, 1]; it is cast to e4m3 after a multiply by P_SCALE = 2**8
  (exact, so the rounding is e4m3's own; probabilities down to 2**-17 stay representable, e4m3's
  smallest subnormal being 2**-9) and the output is divided by P_SCALE at the end. The softmax sum l
  adds the unquantized P in fp32.
- Accumulation: fp32 registers across key blocks; inside one dot (K = D for Q·K^T, BLOCK_N for P·V) the
  tensor cores' FP8 accumulation (Triton's default on sm_90, as `fast_accum` in fp8.py).

The launch grid (query block, head), the block order and the masks are prefill_kernel.py's; the block table
(`fp8_tables`) has a fourth column, the document's index (its V scales).
worker/engine/fp8_attention.py holds the same math in torch (quantization bit for bit; attention
emulated in fp32), which the CPU runs and the tests compare against.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from worker.engine.fp8_attention import FP8_MAX, P_SCALE
from worker.engine.prefill_kernel import LOG2E

QUANT_ROWS = 64  # tokens per program of the quantization kernel
# Launch shape (query rows, key rows, warps, stages): prefill_kernel.py's bf16 shape until the H200
# measures others (bench/fp8_prefill.py --attn-shapes)
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 64, 8, 3
PAD = 16  # V8's token stride is padded to a multiple of this (16-byte aligned rows)


@triton.jit
def _rows_to_fp8(X, X8, S, rows, h, heads, stride_xt, stride_xh, T, D: tl.constexpr):
    """One scale per (row, head): X [T, heads, D] strided -> X8 [T, heads, D] contiguous, S [T, heads]."""
    d = tl.arange(0, D)
    mask = rows < T
    x = tl.load(X + rows[:, None] * stride_xt + h * stride_xh + d[None, :], mask=mask[:, None], other=0.0)
    x = x.to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), 1), 1e-12) / 448.0  # [R]
    x8 = tl.minimum(tl.maximum(x / scale[:, None], -448.0), 448.0).to(tl.float8e4nv)
    tl.store(X8 + (rows[:, None] * heads + h) * D + d[None, :], x8, mask=mask[:, None])
    tl.store(S + rows * heads + h, scale, mask=mask)


@triton.jit
def _v_scale_kernel(V, VS, Cu, stride_vt, stride_vh, HKV: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr):
    """Grid (documents, HKV): VS[doc, g, :] = the channels' amax over the document's rows / 448 (fp32)."""
    doc = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1).to(tl.int64)
    a = tl.load(Cu + doc).to(tl.int64)
    b = tl.load(Cu + doc + 1).to(tl.int64)
    d = tl.arange(0, D)
    amax = tl.zeros([D], tl.float32)
    for r0 in range(a, b, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        x = tl.load(V + rows[:, None] * stride_vt + g * stride_vh + d[None, :], mask=(rows < b)[:, None], other=0.0)
        amax = tl.maximum(amax, tl.max(tl.abs(x.to(tl.float32)), 0))
    tl.store(VS + (doc * HKV + g) * D + d, tl.maximum(amax, 1e-12) / 448.0)


@triton.jit
def _attn_quant_kernel(Q, K, V, Q8, QS, K8, KS, V8, VS, Docs, T, TP, stride_qt, stride_qh, stride_kt, stride_kh,
                       stride_vt, stride_vh, H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr):
    """Grid (token blocks, H + 2 * HKV): programs [0, H) quantize Q's heads, [H, H + HKV) K's, the rest V's."""
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)  # head offsets reach past 2**31 on a [H, T, D] layout of a large T
    if h < H:
        _rows_to_fp8(Q, Q8, QS, rows, h, H, stride_qt, stride_qh, T, D)
    elif h < H + HKV:
        _rows_to_fp8(K, K8, KS, rows, h - H, HKV, stride_kt, stride_kh, T, D)
    else:
        g = h - H - HKV
        d = tl.arange(0, D)
        mask = rows < T
        v = tl.load(V + rows[:, None] * stride_vt + g * stride_vh + d[None, :], mask=mask[:, None], other=0.0)
        doc = tl.load(Docs + rows, mask=mask, other=0).to(tl.int64)  # [R]
        scale = tl.load(VS + ((doc * HKV + g) * D)[:, None] + d[None, :])  # [R, D]
        v8 = tl.minimum(tl.maximum(v.to(tl.float32) / scale, -448.0), 448.0).to(tl.float8e4nv)
        tl.store(V8 + (g * D + d[None, :]).to(tl.int64) * TP + rows[:, None], v8, mask=mask[:, None])


@triton.jit
def _scores(q, k, qs, ks):
    return tl.dot(q, tl.trans(k)) * qs[:, None] * ks[None, :]  # [BLOCK_M, BLOCK_N] fp32, log2 units


@triton.jit
def _prefill_fp8_kernel(Q8, QS, K8, KS, V8, VS, O, Blocks, qk_scale, TP, stride_ot, stride_oh,
                        H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, P_SCALE: tl.constexpr):
    pid = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    base = tl.load(Blocks + pid * 4).to(tl.int64)  # first ribbon row of the document
    m0 = tl.load(Blocks + pid * 4 + 1)  # first query row of the block, in the document
    n = tl.load(Blocks + pid * 4 + 2)  # document length
    doc = tl.load(Blocks + pid * 4 + 3).to(tl.int64)  # the document's index (its V scales)
    g = h // (H // HKV)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    mmask = offs_m < n
    q = tl.load(Q8 + ((base + offs_m)[:, None] * H + h) * D + offs_d[None, :], mask=mmask[:, None], other=0.0)
    qs = tl.load(QS + (base + offs_m) * H + h, mask=mmask, other=0.0) * qk_scale  # [BLOCK_M]
    k_ptr = K8 + ((base + offs_n)[:, None] * HKV + g) * D + offs_d[None, :]  # [BLOCK_N, D]
    ks_ptr = KS + (base + offs_n) * HKV + g  # [BLOCK_N]
    v_ptr = V8 + (g * D + offs_d[None, :]) * TP + (base + offs_n)[:, None]  # [BLOCK_N, D], token stride 1
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for j in range(0, m0, BLOCK_N):  # keys wholly before the block: no mask (BLOCK_M % BLOCK_N == 0)
        qk = _scores(q, tl.load(k_ptr + j * HKV * D), qs, tl.load(ks_ptr + j * HKV))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot((p * P_SCALE).to(tl.float8e4nv), tl.load(v_ptr + j))
        m_i = m_new
    hi = tl.minimum(m0 + BLOCK_M, n)
    for j in range(m0, hi, BLOCK_N):  # the diagonal: causal and length masks
        cols = j + offs_n
        nmask = cols < n
        k = tl.load(k_ptr + j * HKV * D, mask=nmask[:, None], other=0.0)
        qk = _scores(q, k, qs, tl.load(ks_ptr + j * HKV, mask=nmask, other=0.0))
        qk = tl.where((cols[None, :] <= offs_m[:, None]) & nmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + j, mask=nmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot((p * P_SCALE).to(tl.float8e4nv), v)
        m_i = m_new
    vs = tl.load(VS + (doc * HKV + g) * D + offs_d) / P_SCALE  # [D]
    out = acc * vs[None, :] / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(O + (base + offs_m)[:, None] * stride_ot + h * stride_oh + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=mmask[:, None])


def fp8_tables(cu_host: list[int], t: int, block_m: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(blocks int32 [blocks, 4]: prefill_kernel.block_table's rows and order plus the document's index;
    docs int32 [t]: each ribbon row's document, n = len(cu_host) - 1 for rows past cu_host[-1]; cu int32 [n + 1])."""
    rows, docs = [], torch.full((t,), len(cu_host) - 1, dtype=torch.int32)
    for i, (a, b) in enumerate(zip(cu_host[:-1], cu_host[1:])):
        rows.extend((a, m0, b - a, i) for m0 in range(0, b - a, block_m))
        docs[a:b] = i
    rows.sort(key=lambda r: -(r[1] + min(block_m, r[2] - r[1])))  # keys a block attends
    blocks = torch.tensor(rows or [(0, 0, 0, 0)], dtype=torch.int32)
    cu = torch.tensor(cu_host, dtype=torch.int32)
    return tuple(x.to(device, non_blocking=True) for x in (blocks, docs, cu))


def quantize_qkv(q, k, v, tables: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """q: [T, H, D], k/v: [T, Hkv, D] (strided views, unit last stride), tables: fp8_tables' of T rows ->
    q8 [T, H, D], qs [T, H], k8 [T, Hkv, D], ks [T, Hkv], v8 [Hkv, D, Tp] (token stride 1, Tp = T rounded up
    to PAD), vs [n + 1, Hkv, D] (the n documents', then the rows past them: 1e-12 / 448, their codes never
    read); e4m3 codes, fp32 scales. Two launches: V's per-document amax, then Q, K and V's cast."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    _, docs, cu = tables
    t, heads, dim = q.shape
    kv_heads, n = k.shape[1], cu.shape[0] - 1
    tp = -(-t // PAD) * PAD
    dev, f8 = q.device, torch.float8_e4m3fn
    vs = torch.full((n + 1, kv_heads, dim), 1e-12 / FP8_MAX, device=dev)  # [n + 1, Hkv, D]
    q8, k8 = torch.empty(t, heads, dim, device=dev, dtype=f8), torch.empty(t, kv_heads, dim, device=dev, dtype=f8)
    v8 = torch.empty(kv_heads, dim, tp, device=dev, dtype=f8)  # [Hkv, D, Tp]
    qs, ks = torch.empty(t, heads, device=dev), torch.empty(t, kv_heads, device=dev)
    if n:
        _v_scale_kernel[(n, kv_heads)](v, vs, cu, v.stride(0), v.stride(1), HKV=kv_heads, D=dim, ROWS=QUANT_ROWS,
                                       num_warps=4)
    if t:
        _attn_quant_kernel[(triton.cdiv(t, QUANT_ROWS), heads + 2 * kv_heads)](
            q, k, v, q8, qs, k8, ks, v8, vs, docs, t, tp, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
            v.stride(0), v.stride(1), H=heads, HKV=kv_heads, D=dim, ROWS=QUANT_ROWS, num_warps=4)
    return q8, qs, k8, ks, v8, vs


def prefill_attention_fp8(q, k, v, tables: tuple[torch.Tensor, ...], scale: float, block_m: int = BLOCK_M,
                          block_n: int = BLOCK_N, num_warps: int = NUM_WARPS, num_stages: int = NUM_STAGES) -> torch.Tensor:
    """prefill_kernel.prefill_attention's contract (q: [T, H, D], k/v: [T, Hkv, D]) with Q, K, V and P in e4m3;
    tables: fp8_tables(cu_host, T, block_m) -> [T, H, D] contiguous, q's dtype."""
    if block_m % block_n:
        raise ValueError(f"block_m {block_m} must be a multiple of block_n {block_n}")
    q8, qs, k8, ks, v8, vs = quantize_qkv(q, k, v, tables)
    t, heads, dim = q.shape
    out = torch.empty(t, heads, dim, device=q.device, dtype=q.dtype)  # [T, H, D]
    _prefill_fp8_kernel[(tables[0].shape[0], heads)](
        q8, qs, k8, ks, v8, vs, out, tables[0], scale * LOG2E, v8.shape[2], out.stride(0), out.stride(1),
        H=heads, HKV=k.shape[1], D=dim, BLOCK_M=block_m, BLOCK_N=block_n, P_SCALE=P_SCALE,
        num_warps=num_warps, num_stages=num_stages)
    return out


def triton_fp8_prefill(q, k, v, cu_host: list[int], scale: float, memo: dict) -> torch.Tensor:
    """The attention backends' entry (attention.triton_prefill) on strided views -> [T, H, D]; the tables are
    built by the first layer of a forward and kept in memo (AttnContext.memo) for the others."""
    if "fp8" not in memo:
        memo["fp8"] = fp8_tables(cu_host, q.shape[0], BLOCK_M, q.device)
    return prefill_attention_fp8(q, k, v, memo["fp8"], scale)  # [T, H, D]
