"""The decode step's GEMMs through a Triton kernel (`EngineOptions.decode_gemm = "triton"`, opt-in).

Why: a decode GEMM has a few dozen rows and reads a whole weight matrix, so its time is that read;
decode_gemm_kernel.py streams the weight once, split over enough programs to fill the GPU.

How it is wired: `install_decode_gemms` gives each decoder layer's GEMM a `DecodeGemm` in front of it
(an nn.Linear or an fp8.Fp8Linear replaced by a DecodeGemm holding it; a merged q/k/v or gate/up group's
`gemm` slot, merge.py, filled with one holding what was there). A DecodeGemm runs the `ribbon::decode_linear`
op only while `kernel_gemms(True)` is active and the call has at most MAX_ROWS rows; otherwise it calls what
it holds, unchanged. The decode step turns it on around its capture and its eager runs
(decode.StepRunner), so prefill, the LM head and every other GEMM keep BLAS. Inside compiled layers
(fuse.py) the switch is a global that dynamo guards: decode and prefill get a graph each. It is the
CUDA thread's alone (one thread owns CUDA and the engine: worker/engine/__init__.py).

The op runs the kernel on CUDA, and on the CPU only under Triton's interpreter (TRITON_INTERPRET=1:
tests); elsewhere it is torch's F.linear, so the CPU keeps working with torch math.
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch
from torch import nn

from worker.engine.errors import EngineSettingError
from worker.engine.fp8 import Fp8Linear
from worker.engine.merge import Merged

log = logging.getLogger(__name__)

DECODE_GEMMS = ("auto", "blas", "triton")
MAX_ROWS = 256  # the most rows a call sends to the kernel (decode buckets; larger calls keep BLAS)
_ON = False  # kernel_gemms: read by DecodeGemm.forward (a dynamo guard inside compiled layers)


def kernel_runs(device: torch.device) -> bool:
    """The Triton kernel runs on CUDA, and on the CPU under Triton's interpreter (TRITON_INTERPRET=1)."""
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def want_decode_gemm(requested: str, device: torch.device) -> str:
    """EngineOptions.decode_gemm: auto -> "blas" (the path every device figure so far measured); "triton" as
    asked where the kernel runs (kernel_runs), else "blas" (torch math on the CPU); "blas" as asked."""
    if requested not in DECODE_GEMMS:
        raise EngineSettingError("decode_gemm", f"{requested!r} is not one of {DECODE_GEMMS}", "auto")
    if requested == "triton" and not kernel_runs(device):
        log.info("decode_gemm=triton needs CUDA (or Triton's interpreter): the decode GEMMs keep torch's math",
                 extra={"device": str(device)})
        return "blas"
    return "blas" if requested == "auto" else requested


@contextlib.contextmanager
def kernel_gemms(on: bool):
    """DecodeGemm modules run the kernel inside (for calls of <= MAX_ROWS rows); the previous state after."""
    global _ON
    saved, _ON = _ON, on
    try:
        yield
    finally:
        _ON = saved


@torch.library.custom_op("ribbon::decode_linear", mutates_args=())
def decode_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [M, K], weight [N, K], bias [N] or None -> x @ weight^T + bias, [M, N] in x's dtype (fp32
    accumulation): the Triton kernel where it runs (kernel_runs), else F.linear."""
    if not kernel_runs(x.device):
        return nn.functional.linear(x, weight, bias)
    from worker.engine import decode_gemm_kernel  # noqa: PLC0415 triton: optional, CUDA builds only

    x = x if x.stride(-1) == 1 else x.contiguous()
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    return decode_gemm_kernel.linear(x, weight, bias)


@decode_linear.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))


class DecodeGemm(nn.Module):
    """y = x @ W^T + b: the kernel op while kernel_gemms(True) is active for calls of <= max_rows rows,
    else `inner` (the module it stands in front of; None: F.linear with W and b). In front of an FP8 GEMM
    max_rows stays below its min_rows: the kernel takes only the calls that read the bf16 weights."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, inner: nn.Module | None,
                 max_rows: int = MAX_ROWS):
        super().__init__()
        self._wb = (weight, bias)  # not registered: inner (or the merged group) owns them
        self.inner = inner
        self.max_rows = max_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self._wb
        if _ON and x.numel() <= self.max_rows * x.shape[-1]:
            y = torch.ops.ribbon.decode_linear(x.reshape(-1, x.shape[-1]), weight, bias)  # [M, N]
            return y.reshape(*x.shape[:-1], y.shape[-1])
        if self.inner is not None:
            return self.inner(x)
        return nn.functional.linear(x, weight, bias)


def _max_rows(gemm: nn.Module | None) -> int:
    """MAX_ROWS, below an FP8 GEMM's min_rows (fp8.Fp8Gemm: calls of fewer rows use the bf16 weights)."""
    return min(MAX_ROWS, getattr(gemm, "min_rows", MAX_ROWS + 1) - 1)


def install_decode_gemms(base, skip: tuple[str, ...] = ()) -> int:
    """A DecodeGemm in front of every GEMM of base's decoder layers (in place; after merge_projections and
    quantize_layers, before compile_layers), except those named in `skip` (module names: "o_proj",
    "merged_gate_up", ...). Idempotent. Returns how many were added."""
    n = 0
    for layer in getattr(base, "layers", []):
        for parent in list(layer.modules()):
            if isinstance(parent, (DecodeGemm, Fp8Linear)):  # their own linears are not the layer's calls
                continue
            for name, child in list(parent.named_children()):
                if name in skip:
                    continue
                if isinstance(child, Merged) and not isinstance(child.gemm, DecodeGemm):
                    child.gemm = DecodeGemm(child.weight, child.bias, child.gemm, _max_rows(child.gemm))
                    n += 1
                elif isinstance(child, Fp8Linear):
                    setattr(parent, name, DecodeGemm(child.linear.weight, child.linear.bias, child, _max_rows(child.gemm)))
                    n += 1
                elif type(child) is nn.Linear:
                    setattr(parent, name, DecodeGemm(child.weight, child.bias, child))
                    n += 1
    log.info("decode GEMMs through the Triton kernel", extra={"gemms": n, "max_rows": MAX_ROWS, "skipped": list(skip)})
    return n


def remove_decode_gemms(base) -> None:
    """Put back what each DecodeGemm stands in front of (benchmarks run both ways on one engine)."""
    for layer in getattr(base, "layers", []):
        for parent in list(layer.modules()):
            if isinstance(parent, Merged):
                if isinstance(parent.gemm, DecodeGemm):
                    parent.gemm = parent.gemm.inner
                continue
            for name, child in list(parent.named_children()):
                if isinstance(child, DecodeGemm):
                    setattr(parent, name, child.inner)
