"""FP8 prefill (`model.quantization = fp8`, Hopper or newer): the decoder layers' GEMMs of prefill run
in FP8 e4m3 through torch._scaled_mm with row-wise scales; decode keeps the bf16 weights.

- Weights: quantized once at load, one scale per output channel (amax / 448), stored next to the
  bf16 weights (decode is bound by reading weights, and keeping it bf16 keeps its accuracy; the
  FP8 copy costs half the bf16 weights' memory).
- Activations: one scale per token (row amax / 448), computed on the fly inside the compiled layer
  (torch.compile fuses the amax, the division and the cast into the kernel that makes the GEMM's
  input, e.g. the RMSNorm before the merged q/k/v GEMM; no fp32 copy of an activation is written).
  q/k/v and gate/up are one merged GEMM each (merge.py), so each input is quantized once.
- The GEMM: cuBLASLt through torch._scaled_mm with the two scale vectors and the bias in its
  epilogue; `fast_accum` (on in the worker; measured in docs/engine.md) lets Hopper's FP8 tensor cores accumulate without
  cuBLAS's periodic promotion to fp32 (bench/fp8_prefill.py measures speed and error both ways).
- Which GEMMs: every nn.Linear of the decoder layers and the merged q/k/v and gate/up GEMMs
  (merge.py); a call with fewer than `min_rows` rows (decode batches, small prefill steps) uses the
  bf16 weights. The LM head (last positions only) and attention are unchanged.
- Off CUDA the same quantized math runs emulated in fp32 (tests check the numerics on CPU).

Fp8Gemm.quant = "kernel" quantizes the input with one Triton kernel (op `ribbon::quant_rows`,
fp8_quant_kernel.py; bit for bit quantize_rows' fp32 math) instead of inductor's code. quantize_layers
sets it at QUANT_KERNEL_SITES, the GEMMs whose input no kernel makes in a form inductor fuses the
quantization into: o_proj (its input is the attention kernel's output) and q/k/v (inductor leaves the
input RMSNorm and this quantization as two kernels, the quantization 0.59 us a token of the 7B stress
mix's prefill against the row kernel's 0.41: fp8_kernels_h200.json). The op is opaque to inductor, so
at gate/up (the residual add, RMSNorm and quantization are one kernel) it would split that kernel and
write the normed rows in bf16 once more; the bench's `quant_kernel_all` variant measured it slower.
Off CUDA "kernel" is quantize_rows' torch math.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from worker.engine.errors import EngineSettingError
from worker.engine.merge import Merged

log = logging.getLogger(__name__)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
MIN_ROWS = 1_024  # GEMMs with fewer rows (decode batches) keep bf16
FAST_ACCUM = True  # the worker's choice (docs/engine.md: both accumulations measured)
MLP_KERNEL = "chunked"  # Fp8Mlp.kernel's default: the fastest measured (bench/fp8_prefill.py, fp8_kernels_h200.json)
QUANT_KERNEL_SITES = ("merged_q_k_v", "q_proj", "k_proj", "v_proj", "o_proj")  # Fp8Gemm.site: the module docstring
SITE_QUANT = "kernel"  # Fp8Gemm.quant at QUANT_KERNEL_SITES (quantize_layers); every other GEMM keeps "fp32"


def quantize_rows(x: torch.Tensor, math: str = "fp32") -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, K] -> (fp8 [M, K], float32 scales [M, 1]) with x ~= q * scale per row.

    math: "fp32" divides in fp32 (the weights at load; the default); "native" multiplies by the
    reciprocal in x's dtype (bf16), the same result to within one bf16 rounding before the e4m3 one
    (bench/fp8_prefill.py measured both)."""
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)  # [M, 1]
    if math == "native":
        inv = (FP8_MAX / amax).to(x.dtype)  # [M, 1]
        return (x * inv).clamp(-FP8_MAX, FP8_MAX).to(FP8), 1.0 / inv.float()
    # times the reciprocal, not a division: torch on CUDA divides by a scalar that way, and written out it is
    # the same bits on every device and in the Triton kernel (fp8_quant_kernel.py)
    scale = amax * (1.0 / FP8_MAX)  # [M, 1]
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


class Fp8Gemm(nn.Module):
    """y = x @ W^T + b, FP8 for calls of >= min_rows rows, else the bf16 weight.

    The attributes below are plain values read inside the compiled layer (dynamo guards them, so a
    change recompiles): fast_accum, bias_in_gemm (the bias in cuBLASLt's epilogue, else an add that
    inductor fuses into the next kernel) and quant (quantize_rows' math, or "kernel": the quant_rows
    op on CUDA). site: the name of the module it stands in for (quantize_layers sets it)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, min_rows: int = MIN_ROWS,
                 fast_accum: bool = FAST_ACCUM):
        super().__init__()
        q, scale = quantize_rows(weight.detach())  # [N, K] fp8, [N, 1]
        self.register_buffer("w_fp8", q, persistent=False)  # [N, K]
        self.register_buffer("w_scale", scale.t().contiguous(), persistent=False)  # [1, N]
        self._bf16 = (weight, bias)  # not registered: the model owns them
        self.min_rows = min_rows
        self.fast_accum = fast_accum
        self.bias_in_gemm = True
        self.quant = "fp32"
        self.site = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self._bf16
        x2 = x.reshape(-1, x.shape[-1])  # [M, K]
        if x2.shape[0] < self.min_rows:
            return nn.functional.linear(x, weight, bias)
        if self.quant == "kernel" and x2.is_cuda:
            a, a_scale = torch.ops.ribbon.quant_rows(x2)  # [M, K], [M, 1]
        else:
            a, a_scale = quantize_rows(x2, "fp32" if self.quant == "kernel" else self.quant)
        y = self.scaled(a, a_scale, x.dtype)  # [M, N]
        return y.reshape(*x.shape[:-1], y.shape[-1])

    def scaled(self, a: torch.Tensor, a_scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """a: fp8 [M, K] with float32 row scales [M, 1] -> (a * a_scale) @ W^T + b in dtype, [M, N]."""
        bias = self._bf16[1]
        in_gemm = bias is not None and self.bias_in_gemm and a.is_cuda
        if a.is_cuda:
            y = torch._scaled_mm(a, self.w_fp8.t(), scale_a=a_scale, scale_b=self.w_scale,
                                 bias=bias if in_gemm else None, out_dtype=dtype,
                                 use_fast_accum=self.fast_accum)  # [M, N]
        else:  # emulated: the same quantized operands, fp32 math
            y = ((a.float() @ self.w_fp8.float().t()) * a_scale * self.w_scale).to(dtype)  # [M, N]
        if bias is not None and not in_gemm:
            y = y + bias
        return y


class Fp8Linear(nn.Module):
    """Stands in for an nn.Linear of a decoder layer (keeps it as `.linear`)."""

    def __init__(self, linear: nn.Linear, min_rows: int = MIN_ROWS, fast_accum: bool = FAST_ACCUM):
        super().__init__()
        self.linear = linear
        self.gemm = Fp8Gemm(linear.weight, linear.bias, min_rows, fast_accum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gemm(x)


@torch.library.custom_op("ribbon::quant_rows", mutates_args=())
def quant_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, K] -> quantize_rows(x, "fp32"): (fp8 [M, K], float32 [M, 1]).
    CUDA: one Triton kernel (fp8_quant_kernel.py); elsewhere the torch math."""
    if not x.is_cuda:
        return quantize_rows(x)
    from worker.engine import fp8_quant_kernel  # noqa: PLC0415 triton: optional, CUDA builds only

    x = x if x.stride(-1) == 1 else x.contiguous()
    q = torch.empty(x.shape, device=x.device, dtype=FP8)
    scale = torch.empty((x.shape[0], 1), device=x.device, dtype=torch.float32)
    if x.shape[0] and x.shape[1]:
        fp8_quant_kernel.launch(x, q, scale)
    return q, scale


@quant_rows.register_fake
def _(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape, dtype=FP8), x.new_empty((x.shape[0], 1), dtype=torch.float32)


@torch.library.custom_op("ribbon::silu_mul_quant", mutates_args=())
def silu_mul_quant(gu: torch.Tensor, kernel: str) -> tuple[torch.Tensor, torch.Tensor]:
    """gu: [M, 2I] (gate | up) -> quantize_rows(silu(gate) * up): (fp8 [M, I], float32 [M, 1]).
    CUDA: one Triton kernel, kernel "one_pass" | "two_pass" | "chunked" (fp8_kernel.py); elsewhere the same
    math in torch."""
    if not gu.is_cuda:
        gate, up = gu.chunk(2, dim=-1)
        return quantize_rows(nn.functional.silu(gate) * up)
    from worker.engine import fp8_kernel  # noqa: PLC0415 triton: optional, CUDA builds only

    gu = gu if gu.stride(-1) == 1 else gu.contiguous()
    q = torch.empty((gu.shape[0], gu.shape[1] // 2), device=gu.device, dtype=FP8)
    scale = torch.empty((gu.shape[0], 1), device=gu.device, dtype=torch.float32)
    if gu.shape[0]:
        fp8_kernel.launch(gu, q, scale, kernel)
    return q, scale


@silu_mul_quant.register_fake
def _(gu: torch.Tensor, kernel: str) -> tuple[torch.Tensor, torch.Tensor]:
    return gu.new_empty((gu.shape[0], gu.shape[1] // 2), dtype=FP8), gu.new_empty((gu.shape[0], 1), dtype=torch.float32)


class Fp8Mlp(nn.Module):
    """Stands in for a gated SiLU MLP whose gate/up GEMM is merged (merge.py) and FP8: for calls of
    >= min_rows rows, merged GEMM -> silu_mul_quant (one kernel: SiLU, multiply, row amax, cast) ->
    FP8 down GEMM; other calls (and kernel "none": inductor's fusion) run the model's own MLP (`.inner`).
    kernel: "one_pass" | "two_pass" | "chunked" | "none" (fp8_kernel.py; bench/fp8_prefill.py measures them)."""

    def __init__(self, mlp: nn.Module, group: Merged, down: Fp8Gemm, min_rows: int):
        super().__init__()
        self.inner = mlp
        self._parts = (group, down)  # not registered: inner owns them
        self.min_rows = min_rows
        self.kernel = MLP_KERNEL

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])  # [M, H]
        if self.kernel == "none" or x2.shape[0] < self.min_rows:
            return self.inner(x)
        group, down = self._parts
        q, scale = torch.ops.ribbon.silu_mul_quant(group.gemm(x2), self.kernel)  # [M, I], [M, 1]
        y = down.scaled(q, scale, x.dtype)  # [M, H]
        return y.reshape(*x.shape[:-1], y.shape[-1])


def _fused_mlp(mlp: nn.Module, min_rows: int) -> Fp8Mlp | None:
    """An Fp8Mlp for this MLP if it is the gated SiLU form with merged FP8 gate/up and FP8 down_proj."""
    group, down, act = (getattr(mlp, n, None) for n in ("merged_gate_up", "down_proj", "act_fn"))
    if not (isinstance(group, Merged) and isinstance(group.gemm, Fp8Gemm) and isinstance(down, Fp8Linear)):
        return None
    if type(act).__name__ not in ("SiLU", "SiLUActivation") or len(group.sizes) != 2 or group.sizes[0] != group.sizes[1]:
        return None
    return Fp8Mlp(mlp, group, down.gemm, min_rows)


def check_fp8(device: torch.device) -> None:
    """model.quantization = fp8 needs FP8 tensor cores (compute capability 8.9 or newer) or the CPU emulation."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9):
        name = torch.cuda.get_device_name(device)
        raise EngineSettingError("model.quantization", f"fp8 needs compute capability >= 8.9; {name} has "
                                 f"{'.'.join(map(str, torch.cuda.get_device_capability(device)))}", "none")


def _place(gemm: Fp8Gemm, site: str) -> None:
    """Name the module a GEMM stands in for, and give the QUANT_KERNEL_SITES the row kernel (SITE_QUANT)."""
    gemm.site = site
    if site in QUANT_KERNEL_SITES:
        gemm.quant = SITE_QUANT


def quantize_layers(base, device: torch.device, min_rows: int = MIN_ROWS, fast_accum: bool = FAST_ACCUM) -> int:
    """Give every decoder layer's GEMMs an FP8 path (before compile_layers). Returns how many."""
    check_fp8(device)
    n = 0
    for layer in base.layers:
        for parent in list(layer.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, Fp8Linear(child, min_rows, fast_accum))
                    _place(getattr(parent, name).gemm, name)
                    n += 1
                elif isinstance(child, Merged) and child.gemm is None:
                    child.gemm = Fp8Gemm(child.weight, child.bias, min_rows, fast_accum)
                    _place(child.gemm, name)
                    n += 1
        mlp = getattr(layer, "mlp", None)
        fused = _fused_mlp(mlp, min_rows) if mlp is not None else None
        if fused is not None:
            layer.mlp = fused
    log.info("fp8 prefill GEMMs", extra={"gemms": n, "min_rows": min_rows, "fast_accum": fast_accum})
    return n


def fp8_gemms(base) -> list[Fp8Gemm]:
    """Every Fp8Gemm of base's decoder layers (benchmarks switch their attributes)."""
    return [m for m in base.modules() if isinstance(m, Fp8Gemm)]


def fp8_mlps(base) -> list[Fp8Mlp]:
    """Every Fp8Mlp of base's decoder layers (benchmarks switch their kernel)."""
    return [m for m in base.modules() if isinstance(m, Fp8Mlp)]
