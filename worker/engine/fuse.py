"""Fused element-wise work: each decoder layer (transformers' own code) through torch.compile.

Why: an eager Qwen2/Llama layer launches about 20 small kernels besides its matmuls (fp32
RMSNorm, rotary, SiLU-multiply, residual adds); inductor fuses them into a few Triton kernels
and leaves the matmuls to cuBLAS. The model code stays in transformers: only `layer.compile()`.

Attention is not compiled: the registered attention functions are `torch.compiler.disable`d
(attention.py), so each layer has one graph break there. That costs host time only, which
prefill hides behind 32k-token forwards and decode never pays (its step is a CUDA graph).

Shapes: the packed length T (prefill) and the rows B (decode) are dynamic, so one graph serves
every size (dynamo specialises size 1). Every layer shares the same code, hence the same
compiled graphs; `recompiles` in the returned report counts what dynamo had to redo.
"""

from __future__ import annotations

import logging
import warnings

import torch

from worker.engine.errors import EngineSettingError

log = logging.getLogger(__name__)

# Each layer is its own module instance; dynamo guards per instance, so the cache limit must
# hold a few graphs (sizes 1 and n, prefill and decode) per layer of the deepest model we run.
CACHE_LIMIT = 1024
# Round to bf16 wherever the eager code casts (RMSNorm's `.to(input_dtype)`, ...): without it a
# fused kernel keeps fp32 intermediates and the logits drift from eager/HF (measured on the tiny
# bf16 model: 0.078 relative vs 0.0 with it), so greedy output would differ from Hugging Face's.
INDUCTOR_OPTIONS = {"emulate_precision_casts": True}


def want_compile(requested: str, device: torch.device, backend: str) -> bool:
    """engine.compile: auto -> on CUDA with a fused backend (inductor needs Triton there), off elsewhere."""
    if requested == "off":
        return False
    if requested == "on":
        if device.type != "cuda" or backend == "reference":
            raise EngineSettingError("engine.compile", f"on needs CUDA and a fused attention backend (device {device}, "
                                     f"backend {backend})", "auto or off")
        return True
    return device.type == "cuda" and backend != "reference"


def compile_layers(base) -> int:
    """Compile every decoder layer of `base` in place; returns how many were compiled."""
    layers = getattr(base, "layers", None)
    if layers is None:
        raise EngineSettingError("engine.compile", f"{type(base).__name__} has no .layers (a decoder-layer stack)",
                                 "off")
    _raise_limits()
    _quiet_imports()
    for layer in layers:
        layer.compile(dynamic=True, options=INDUCTOR_OPTIONS)
    log.info("decoder layers compiled", extra={"layers": len(layers)})
    return len(layers)


def uncompile_layers(base) -> None:
    """Back to eager layers (benchmarks compare both in one process)."""
    for layer in getattr(base, "layers", []):
        layer._compiled_call_impl = None


def _quiet_imports() -> None:
    """Inductor imports torch.utils.mkldnn, whose torch.jit.script_method use warns (torch's own
    deprecation, nothing we call); import it once here with that one warning silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script_method.* is deprecated", category=DeprecationWarning)
        import torch.utils.mkldnn  # noqa: F401, PLC0415 imported under the warnings filter above


def _raise_limits() -> None:
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), CACHE_LIMIT))
