"""Per-token FP8 quantization of a GEMM input in one Triton kernel (fp8.py's `quant_rows` op launches it
on CUDA when an Fp8Gemm's quant is "kernel").

Why: where no kernel of the compiled layer makes the GEMM's input in a form inductor fuses the
quantization into, inductor emits it as a reduction kernel of its own (bench/fp8_prefill.py's profile
of the 7B stress mix: `triton_red_fused_..._abs_amax_clamp_div...`, 683 us for a [64k, 3584] bf16
input, about 4x the time its bytes take at the H200's copy bandwidth). Here each program takes ROWS whole
rows as one [ROWS, BLOCK] tile in registers (BLOCK: K rounded up to a power of two), reads them
once, reduces each row's amax and writes the codes and the scales.

The numerics are quantize_rows(x, "fp32")'s bit for bit: amax of |x| (exact in x's dtype), in fp32
clamped at 1e-12, scale = amax * (1 / 448) (a product, which is how torch on CUDA divides by a scalar), code = e4m3(clamp(x / scale, -448, 448)) rounded to nearest
even. The division is IEEE-rounded (tl.div_rn: Triton's `/` on fp32 is the approximate
div.full.f32, which would let a code land on the other side of a rounding boundary).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

TILE = 8_192  # values a program holds: ROWS = TILE // BLOCK rows (at least 1, at most MAX_ROWS)
MAX_ROWS = 16
VALUES_PER_THREAD = 32  # warps = ROWS * BLOCK / (32 * VALUES_PER_THREAD), within [MIN_WARPS, MAX_WARPS]
MIN_WARPS, MAX_WARPS = 4, 16


@triton.jit
def _quant_rows_kernel(X, Q, S, m, k, stride_x, stride_q, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # [ROWS]
    cols = tl.arange(0, BLOCK)  # [BLOCK]
    in_rows = rows < m
    mask = in_rows[:, None] & (cols[None, :] < k)  # [ROWS, BLOCK]
    r64 = rows.to(tl.int64)
    x = tl.load(X + r64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)  # [ROWS, BLOCK]
    amax = tl.max(tl.abs(x), axis=1).to(tl.float32)  # [ROWS]: a value of x, exact
    scale = tl.maximum(amax, 1e-12) * (1.0 / 448.0)  # [ROWS]
    q = tl.div_rn(x.to(tl.float32), scale[:, None])
    q = tl.minimum(tl.maximum(q, -448.0), 448.0)
    tl.store(Q + r64[:, None] * stride_q + cols[None, :], q.to(tl.float8e4nv), mask=mask)
    tl.store(S + rows, scale, mask=in_rows)


def launch_shape(k: int) -> tuple[int, int, int]:
    """K -> (ROWS, BLOCK, warps) of one program."""
    block = triton.next_power_of_2(max(k, 1))
    rows = max(1, min(MAX_ROWS, TILE // block))
    warps = max(MIN_WARPS, min(MAX_WARPS, rows * block // (32 * VALUES_PER_THREAD)))
    return rows, block, warps


def launch(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """x [M, K] (unit column stride) -> q [M, K] float8_e4m3fn, scale [M, 1] float32."""
    m, k = x.shape
    rows, block, warps = launch_shape(k)
    _quant_rows_kernel[(triton.cdiv(m, rows),)](x, q, scale, m, k, x.stride(0), q.stride(0), ROWS=rows, BLOCK=block,
                                                num_warps=warps)
