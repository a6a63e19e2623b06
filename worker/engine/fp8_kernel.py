"""The MLP's SiLU-multiply and the per-token FP8 quantization of its result in one Triton kernel
(fp8.py's `silu_mul_quant` op launches it on CUDA).

Why: with FP8 GEMMs, down_proj's input h = silu(gate) * up ([M, I], I = 18,944 on Qwen2.5-7B) needs
its row amax before it can be cast. Inductor fuses this into a looped reduction that was the largest
non-GEMM kernel of an FP8 prefill (bench/fp8_prefill.py's profile: 14% of the kernel time, 2.6x the
bf16 SiLU-multiply). Here each program takes whole rows and reads each from memory once: `one_pass`
(the default) holds the row in registers, one program of 32 warps per row; `two_pass` finds the
amax in a first pass and casts in a second that finds the row in L2 (a persistent grid of two
programs per SM keeps the rows in flight well within L2). On the H200's 7B stress mix the kernel
took 1.55 us per token (one_pass) and 1.71 us (two_pass) against inductor's 2.07 us.

`chunked` (the default, fp8.MLP_KERNEL: 0.96 us a token of the 7B stress mix against one_pass's 1.54 in
fp8_kernels_h200.json) holds the row as CHUNKS power-of-two chunks (18,944 = 5 x
4,096: 8% padding against one_pass's 42%, whose padded lanes run the SiLU too), keeps h in the
activation dtype and masks the last chunk only. For Qwen2.5-7B's rows that is 58 registers a thread
at 16 warps (ptxas for sm_90, with masks on every chunk 110): two programs fit an SM, so one can
load while the other reduces and stores; one_pass's 32 warps of 52-64 registers fill an SM alone.

The numerics are the eager model's: silu(gate) rounded to the activation dtype, times up, rounded
again, then quantize_rows' fp32 math (amax / 448 per row, divide, clamp, round to e4m3).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

TWO_PASS_BLOCK, TWO_PASS_WARPS, PROGRAMS_PER_SM = 4_096, 8, 2
ONE_PASS_WARPS, ONE_PASS_MAX = 32, 32_768  # wider rows (more than 32 values per thread) take two_pass
CHUNK_SIZES, CHUNKS_MAX = (1_024, 2_048, 4_096, 8_192), 8  # chunked: 18,944 = 5 x 4,096 (less 1,536)
CHUNK_VALUES_PER_THREAD = 8  # chunked's warps: 8 values (16 bytes of bf16) per thread per chunk


@triton.jit
def _silu_mul(g, u):
    """silu(g) * u in g's dtype, each step rounded as the eager MLP rounds it."""
    gf = g.to(tl.float32)
    act = (gf / (1.0 + tl.exp(-gf))).to(g.dtype)  # silu, rounded as the eager MLP rounds it
    return (act.to(tl.float32) * u.to(tl.float32)).to(g.dtype)


@triton.jit
def _h(gu_row, cols, mask, i):
    g = tl.load(gu_row + cols, mask=mask, other=0.0)
    u = tl.load(gu_row + i + cols, mask=mask, other=0.0)
    return _silu_mul(g, u).to(tl.float32)  # [BLOCK]


@triton.jit
def _silu_mul_quant_kernel(GU, Q, S, m, i, stride_gu, stride_q, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    for row in range(tl.program_id(0), m, tl.num_programs(0)):
        gu_row = GU + tl.cast(row, tl.int64) * stride_gu
        q_row = Q + tl.cast(row, tl.int64) * stride_q
        if ONE_PASS:  # BLOCK >= i: the whole row in registers
            cols = tl.arange(0, BLOCK)
            mask = cols < i
            h = _h(gu_row, cols, mask, i)
            scale = tl.maximum(tl.max(tl.abs(h), axis=0), 1e-12) / 448.0
            q = tl.minimum(tl.maximum(h / scale, -448.0), 448.0)
            tl.store(q_row + cols, q.to(tl.float8e4nv), mask=mask)
        else:  # the amax, then the cast; the second pass reads the row back from L2
            amax = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, i, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                amax = tl.maximum(amax, tl.abs(_h(gu_row, cols, cols < i, i)))
            scale = tl.maximum(tl.max(amax, axis=0), 1e-12) / 448.0
            for off in range(0, i, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                mask = cols < i
                q = tl.minimum(tl.maximum(_h(gu_row, cols, mask, i) / scale, -448.0), 448.0)
                tl.store(q_row + cols, q.to(tl.float8e4nv), mask=mask)
        tl.store(S + row, scale)


def chunk_shape(i: int) -> tuple[int, int] | None:
    """I -> (CHUNK, CHUNKS) of the chunked kernel: the power-of-two chunk of CHUNK_SIZES that pads the row
    least in at most CHUNKS_MAX chunks (the larger chunk on a tie); None where none fits."""
    fits = [(-(-i // c) * c, -c) for c in CHUNK_SIZES if -(-i // c) <= CHUNKS_MAX]
    if not fits:
        return None
    c = -min(fits)[1]
    return c, -(-i // c)


@triton.jit
def _silu_mul_quant_chunked_kernel(GU, Q, S, i, stride_gu, stride_q, CHUNK: tl.constexpr, CHUNKS: tl.constexpr):
    """One row a program, as CHUNKS chunks of CHUNK columns, the last one masked: h in registers in the
    activation dtype (one_pass holds it in fp32, padded to a power of two), masks on the last chunk only
    (ptxas: 58 registers a thread for 18,944 at 16 warps, 110 with a mask on every chunk)."""
    row = tl.program_id(0)
    gu_row = GU + tl.cast(row, tl.int64) * stride_gu
    q_row = Q + tl.cast(row, tl.int64) * stride_q
    hs = ()
    top = tl.zeros([CHUNK], dtype=GU.dtype.element_ty)
    for n in tl.static_range(CHUNKS):
        cols = n * CHUNK + tl.arange(0, CHUNK)
        if n < CHUNKS - 1:
            h = _silu_mul(tl.load(gu_row + cols), tl.load(gu_row + i + cols))  # [CHUNK]
        else:
            h = _silu_mul(tl.load(gu_row + cols, mask=cols < i, other=0.0),
                          tl.load(gu_row + i + cols, mask=cols < i, other=0.0))
        top = tl.maximum(top, tl.abs(h))  # exact in the activation dtype
        hs = hs + (h,)
    scale = tl.maximum(tl.max(top.to(tl.float32), axis=0), 1e-12) / 448.0  # as one_pass computes it
    for n in tl.static_range(CHUNKS):
        cols = n * CHUNK + tl.arange(0, CHUNK)
        q = tl.minimum(tl.maximum(hs[n].to(tl.float32) / scale, -448.0), 448.0).to(tl.float8e4nv)
        if n < CHUNKS - 1:
            tl.store(q_row + cols, q)
        else:
            tl.store(q_row + cols, q, mask=cols < i)
    tl.store(S + row, scale)


def launch(gu: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, kernel: str) -> None:
    """gu [M, 2I] (gate | up, unit column stride) -> q [M, I] float8_e4m3fn, scale [M, 1] float32.
    kernel: "one_pass" | "two_pass" | "chunked" (rows wider than their launch allows take two_pass)."""
    m, i = q.shape
    shape = chunk_shape(i)
    if kernel == "chunked" and shape is not None:
        warps = max(4, min(32, shape[0] // (32 * CHUNK_VALUES_PER_THREAD)))
        _silu_mul_quant_chunked_kernel[(m,)](gu, q, scale, i, gu.stride(0), q.stride(0), CHUNK=shape[0],
                                             CHUNKS=shape[1], num_warps=warps)
        return
    if kernel == "one_pass" and triton.next_power_of_2(i) <= ONE_PASS_MAX:
        _silu_mul_quant_kernel[(m,)](gu, q, scale, m, i, gu.stride(0), q.stride(0), BLOCK=triton.next_power_of_2(i),
                                     ONE_PASS=True, num_warps=ONE_PASS_WARPS)
        return
    sms = torch.cuda.get_device_properties(gu.device).multi_processor_count if gu.is_cuda else 4
    _silu_mul_quant_kernel[(min(m, sms * PROGRAMS_PER_SM),)](gu, q, scale, m, i, gu.stride(0), q.stride(0),
                                                             BLOCK=TWO_PASS_BLOCK, ONE_PASS=False,
                                                             num_warps=TWO_PASS_WARPS)
