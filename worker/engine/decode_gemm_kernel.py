"""y = x @ W^T + b for decode's skinny GEMMs (a few to 256 rows: decode_gemm.MAX_ROWS) in Triton, streaming W once.

Why: a decode step's GEMM has a few dozen rows, so its time is the time to read the weight matrix.
In the 7B stress mix's decode profile (bench/results/engine-7b_h200.json) cuBLAS read the merged
gate/up weights at 3.8 TB/s but q/k/v, o_proj and down_proj (split-K plus its reduce) at 2.3-3.1 TB/s,
against the H200's 4.24 TB/s copy bandwidth. This kernel gives each program a [BLOCK_N, K-slice] tile of
W (row-major, as nn.Linear stores it: K contiguous) and every row of x for that K-slice, so each weight
byte is read by one program, once.

Layout of the work: grid (m tiles, n tiles, K splits), m fastest, so the programs that share a W tile
(M > BLOCK_M) run side by side and the second read comes from L2. Each program accumulates
W_tile @ x_tile^T ([BLOCK_N, BLOCK_M], fp32: the wide dimension N is the MMA's M, as in swap-AB skinny
GEMMs) over its K-slice.

Split-K reduction: deterministic. With one split the program adds the bias and stores y in x's dtype.
With S splits each program stores its fp32 partial sum in a workspace [S, M, N] and a second kernel adds
the S partials in split order, then the bias, and rounds once: the same bits on every run and every
replay (fp32 atomics would make the sum's order, hence its last bits, depend on scheduling). The
workspace comes from torch's allocator inside the call, so a CUDA graph capture takes it from the
graph's pool (static on replay) and nothing syncs with the host.

Launch configs come from `launch_config` (a heuristic over the shape and the SM count, no run-time
autotuning: a graph capture must not time kernels): BLOCK_M the rows rounded up to a power of two (16 to
128), BLOCK_N 128, BLOCK_K 64, and the split of least estimated time with at least MIN_BLOCKS_PER_SPLIT
K-blocks a program (a shorter loop would not fill the pipeline). The estimate (_estimate_us): more programs
fill the SMs' last wave (an SM alone streams only about SM_SHARE_CAP times its share of the bandwidth: its
bytes in flight bound it), while each split adds its fp32 partials' bytes and the reduce kernel.
bench/decode_gemm.py times it against cuBLAS and cuBLASLt and sweeps the split.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

BLOCK_N = 128
BLOCK_K = 64
MAX_BLOCK_M = 128
MIN_BLOCKS_PER_SPLIT = 8
MAX_SPLITS = 16
REDUCE_BLOCK = 1_024
# launch_config's time model (not measured yet: bench/decode_gemm.py sweeps the split on a device)
BANDWIDTH = 4.0e12  # bytes/s the weights stream at, all SMs busy (the H200 copies at 4.24e12)
SM_SHARE_CAP = 1.5  # an SM's bandwidth alone over its share of BANDWIDTH (bytes in flight per SM bound it)
REDUCE_US = 2.0  # the reduce kernel's own time in a CUDA graph, besides its bytes


@dataclass(frozen=True)
class LaunchConfig:
    block_m: int
    block_n: int
    block_k: int
    splits: int
    k_per_split: int  # a multiple of block_k
    warps: int
    stages: int


@triton.jit
def _gemm_kernel(X, W, B, Y, P, M, N, K, k_per_split, stride_xm, stride_wn, stride_ym,
                 HAS_BIAS: tl.constexpr, PARTIAL: tl.constexpr, EVEN_K: tl.constexpr, IEEE: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_s = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    offs_k = tl.arange(0, BLOCK_K)  # [BK]
    mmask = offs_m < M
    nmask = offs_n < N
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(k_lo + k_per_split, K)
    w_ptr = W + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]  # [BN, BK]
    x_ptr = X + offs_m[None, :].to(tl.int64) * stride_xm + offs_k[:, None]  # [BK, BM]: x^T
    acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        if EVEN_K:
            w = tl.load(w_ptr + k0, mask=nmask[:, None], other=0.0)
            x = tl.load(x_ptr + k0, mask=mmask[None, :], other=0.0)
        else:
            kmask = (k0 + offs_k) < k_hi
            w = tl.load(w_ptr + k0, mask=nmask[:, None] & kmask[None, :], other=0.0)
            x = tl.load(x_ptr + k0, mask=kmask[:, None] & mmask[None, :], other=0.0)
        if IEEE:
            acc = tl.dot(w, x, acc, input_precision="ieee")
        else:
            acc = tl.dot(w, x, acc)
    mask = nmask[:, None] & mmask[None, :]  # [BN, BM]
    if PARTIAL:
        rows = (pid_s * M + offs_m[None, :]).to(tl.int64)  # [1, BM]: rows of the [S * M, N] workspace
        tl.store(P + rows * N + offs_n[:, None], acc, mask=mask)
    else:
        if HAS_BIAS:
            acc += tl.load(B + offs_n, mask=nmask, other=0.0).to(tl.float32)[:, None]
        y_ptr = Y + offs_m[None, :].to(tl.int64) * stride_ym + offs_n[:, None]
        tl.store(y_ptr, acc.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _reduce_kernel(P, B, Y, M, N, splits, stride_ym, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    """One program per (row, BLOCK columns): y = sum over splits in split order (+ bias), rounded once."""
    m = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, splits):
        acc += tl.load(P + (s * M + m).to(tl.int64) * N + offs, mask=mask, other=0.0)
    if HAS_BIAS:
        acc += tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + m.to(tl.int64) * stride_ym + offs, acc.to(Y.dtype.element_ty), mask=mask)


@functools.cache
def _sms(device: torch.device) -> int:
    """The device's SM count; off CUDA (Triton's interpreter: tests) the H100/H200's, so tests launch what they do."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132


def _estimate_us(m: int, n: int, k: int, elem: int, tiles: int, per: int, splits: int, sms: int) -> float:
    """A launch's time in the model the split is chosen by (module docstring): W's tiles streamed at
    BANDWIDTH shared by the busy SMs, one program an SM at a time, an SM alone reaching SM_SHARE_CAP times its
    share (the last, partial wave); the fp32 partials' bytes once at BANDWIDTH and REDUCE_US for the reduce."""
    programs = tiles * splits
    fair_us = BLOCK_N * per * BLOCK_K * elem / (BANDWIDTH / sms) * 1e6  # a program's tile at an SM's share
    full, rest = divmod(programs, sms)
    us = fair_us * (full + (max(1 / SM_SHARE_CAP, rest / sms) if rest else 0))
    if splits > 1:
        us += splits * m * n * 4 / BANDWIDTH * 1e6 + REDUCE_US
    return us


def launch_config(m: int, n: int, k: int, sms: int, splits: int | None = None, elem: int = 2) -> LaunchConfig:
    """The launch of an [m, k] x [n, k]^T GEMM (elem bytes a weight) on a device of `sms` SMs; `splits`
    forces the K split (bench/decode_gemm.py sweeps it), else the split of least _estimate_us, with at least
    MIN_BLOCKS_PER_SPLIT K-blocks a program."""
    block_m = max(16, min(MAX_BLOCK_M, triton.next_power_of_2(max(m, 1))))
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, BLOCK_N)
    k_blocks = max(1, triton.cdiv(k, BLOCK_K))
    if splits is None:
        best = (float("inf"), 1)
        for s in range(1, MAX_SPLITS + 1):
            per = triton.cdiv(k_blocks, s)
            if s > 1 and per < MIN_BLOCKS_PER_SPLIT:
                break
            real = triton.cdiv(k_blocks, per)  # splits that hold a K-block
            best = min(best, (_estimate_us(m, n, k, elem, tiles, per, real, max(1, sms)), real))
        splits = best[1]
    per = triton.cdiv(k_blocks, max(1, min(splits, k_blocks)))
    warps = 8 if block_m >= 128 else 4
    return LaunchConfig(block_m, BLOCK_N, BLOCK_K, triton.cdiv(k_blocks, per), per * BLOCK_K, warps, 4 if block_m < 128 else 3)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cfg: LaunchConfig | None = None,
           sms: int | None = None) -> torch.Tensor:
    """x [M, K] (unit column stride), weight [N, K] (unit column stride), bias [N] or None -> [M, N] in x's
    dtype, fp32 accumulation. cfg: the launch (default launch_config(M, N, K, sms, ...), sms: the device's)."""
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)  # [M, N]
    if m == 0 or n == 0:
        return y
    if cfg is None:
        cfg = launch_config(m, n, k, sms or _sms(x.device), elem=weight.element_size())
    b = bias if bias is not None else y  # an unused pointer without bias
    partial = cfg.splits > 1
    ws = torch.empty((cfg.splits * m, n), device=x.device, dtype=torch.float32) if partial else y  # [S * M, N]
    grid = (triton.cdiv(m, cfg.block_m), triton.cdiv(n, cfg.block_n), cfg.splits)
    _gemm_kernel[grid](x, weight, b, y, ws, m, n, k, cfg.k_per_split, x.stride(0), weight.stride(0), y.stride(0),
                       HAS_BIAS=bias is not None, PARTIAL=partial, EVEN_K=k % cfg.block_k == 0,
                       IEEE=x.dtype == torch.float32,
                       BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                       num_warps=cfg.warps, num_stages=cfg.stages)
    if partial:
        _reduce_kernel[(m, triton.cdiv(n, REDUCE_BLOCK))](ws, b, y, m, n, cfg.splits, y.stride(0),
                                                          HAS_BIAS=bias is not None, BLOCK=REDUCE_BLOCK, num_warps=4)
    return y
