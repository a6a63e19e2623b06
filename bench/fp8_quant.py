"""The FP8 prefill's quantization kernels alone at one bin's shapes (bench/fp8_prefill.py --variants kernels runs
this on the GPU before its variants): a GEMM input's row quantization [rows, hidden] by torch's eager ops, by
inductor (compiled as the layers are: dynamic shapes, the engine's options) and by the quant_rows op's Triton
kernel; the MLP's SiLU-multiply-quantize [rows, 2 x intermediate] by each launch of fp8_kernel.py. Each: the
median time of a call, the bytes it moves over that time, and whether its codes and scales equal the
reference's (torch's eager math; one_pass for the SiLU launches).
"""

from __future__ import annotations

import torch

from bench.fp8_attention import time_ms
from worker.engine.fp8 import quant_rows, quantize_rows, silu_mul_quant
from worker.engine.fuse import INDUCTOR_OPTIONS


def _same(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> dict:
    codes = int((a[0].view(torch.uint8) != b[0].view(torch.uint8)).sum())
    return {"codes_differ": codes, "scales_equal": torch.equal(a[1], b[1])}


def _timed(fn, nbytes: int) -> dict:
    ms = time_ms(fn)  # CUDA events
    return {"us": ms * 1e3, "gb_per_s": nbytes / (ms * 1e-3) / 1e9}


def quant_kernels_alone(rows: int, hidden: int, inter: int, device: str = "cuda") -> dict:
    g = torch.Generator(device=device).manual_seed(0)
    out = {"rows": rows, "hidden": hidden, "intermediate": inter} | _rows(rows, hidden, g) | _silu(rows, inter, g)
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def _rows(rows: int, hidden: int, g: torch.Generator) -> dict:
    x = torch.randn(rows, hidden, device=g.device, generator=g, dtype=torch.bfloat16)  # [rows, hidden]
    compiled = torch.compile(quantize_rows, dynamic=True, options=INDUCTOR_OPTIONS)
    nbytes = rows * hidden * 3 + rows * 4  # bf16 in, e4m3 and a float32 scale out
    ref = quantize_rows(x)
    runs = {"torch_eager": lambda: quantize_rows(x), "inductor": lambda: compiled(x), "kernel": lambda: quant_rows(x)}
    return {f"quant_rows_{name}": _timed(fn, nbytes) | _same(fn(), ref) for name, fn in runs.items()}


def _silu(rows: int, inter: int, g: torch.Generator) -> dict:
    gu = torch.randn(rows, 2 * inter, device=g.device, generator=g, dtype=torch.bfloat16) * 4  # [rows, 2I]
    nbytes = rows * inter * 5 + rows * 4  # gate and up in bf16, e4m3 and a float32 scale out
    ref = silu_mul_quant(gu, "one_pass")
    return {f"silu_mul_quant_{k}": _timed(lambda k=k: silu_mul_quant(gu, k), nbytes) | _same(silu_mul_quant(gu, k), ref)
            for k in ("one_pass", "two_pass", "chunked")}
