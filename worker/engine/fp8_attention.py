"""FP8 prefill attention (`model.fp8_attention`, only with `model.quantization = fp8`): the setting's choice
of kernel, and the torch math of prefill_fp8_kernel.py that runs where Triton's FP8 kernel cannot.

- `quantize_qkv`: the kernel's quantization in torch, the same e4m3 codes and fp32 scales (Q per token and
  head, K per token and KV head, V per document, KV head and channel; prefill_fp8_kernel.py says why).
- `emulated_prefill`: each document's causal attention in fp32 on the dequantized Q, K, V, with P rounded
  to e4m3 after the kernel's P_SCALE. The kernel rounds P against the running row max of its key blocks,
  this against the row's final max: the two differ only in which e4m3 roundings they make. On the CPU the
  reference backend runs this (bench/fp8_accuracy.py measures the accuracy on real weights with it).
- `want_fp8_attention`: the setting -> the prefill kernel the engine runs ("triton_fp8" on CUDA,
  "fp8_emulated" on the CPU), or an EngineSettingError naming model.fp8_attention.
"""

from __future__ import annotations

import itertools

import torch

from worker.engine.errors import EngineSettingError

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
P_SCALE = 256.0  # P in [0, 1] is multiplied by 2**8 before its e4m3 cast (prefill_fp8_kernel.py)
MIN_HEAD_DIM = 32  # Hopper's FP8 wgmma reduces 32 values a step: Q·K^T needs D >= 32


def _rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, h, D] -> (e4m3 [T, h, D], fp32 scales [T, h]): one scale per (token, head)."""
    xf = x.float()
    s = xf.abs().amax(-1).clamp(min=1e-12) / FP8_MAX  # [T, h]
    return (xf / s[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8), s


def quantize_qkv(q, k, v, cu_host: list[int]) -> tuple[torch.Tensor, ...]:
    """q: [T, H, D], k/v: [T, Hkv, D] -> q8 [T, H, D], qs [T, H], k8 [T, Hkv, D], ks [T, Hkv], v8 [T, Hkv, D],
    vs [n + 1, Hkv, D] for the n documents of cu_host and the rows past them (the kernel's codes and scales;
    its v8 is the transpose [Hkv, D, T] of this one)."""
    q8, qs = _rows(q)
    k8, ks = _rows(k)
    vf = v.float()
    bounds = [*cu_host, max(cu_host[-1], v.shape[0])]
    vs = torch.stack([vf[a:b].abs().amax(0) if b > a and i < len(cu_host) - 1 else vf.new_zeros(vf.shape[1:])
                      for i, (a, b) in enumerate(itertools.pairwise(bounds))])  # [n + 1, Hkv, D]
    vs = vs.clamp(min=1e-12) / FP8_MAX  # rows past the documents: the floor (their codes are never read)
    return q8, qs, k8, ks, (vf / _per_row(vs, bounds)).clamp(-FP8_MAX, FP8_MAX).to(FP8), vs


def _per_row(vs: torch.Tensor, bounds: list[int]) -> torch.Tensor:
    """vs [n + 1, Hkv, D] (one V scale per document, and one for the rows past them) -> [T, Hkv, D], each
    row its document's."""
    return vs.repeat_interleave(torch.tensor([b - a for a, b in itertools.pairwise(bounds)], device=vs.device), dim=0)


def dequantized(q, k, v, cu_host: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The values FP8 attention computes with: Q, K, V quantized as the kernel does, back in fp32."""
    q8, qs, k8, ks, v8, vs = quantize_qkv(q, k, v, cu_host)
    row_vs = _per_row(vs, [*cu_host, max(cu_host[-1], v.shape[0])])  # [T, Hkv, D]
    return q8.float() * qs[..., None], k8.float() * ks[..., None], v8.float() * row_vs  # [T, H, D], [T, Hkv, D] x 2


def emulated_prefill(q, k, v, cu_host: list[int], scale: float) -> torch.Tensor:
    """Per-document causal attention with the FP8 kernel's quantization, fp32 math. q: [T, H, D], k/v: [T, Hkv, D]
    -> [T, H, D] in q's dtype (rows past cu_host[-1] stay zero)."""
    qd, kd, vd = dequantized(q, k, v, cu_host)
    groups = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)  # [T, H, D]
    for a, b in itertools.pairwise(cu_host):
        if b == a:
            continue
        qb = qd[a:b].transpose(0, 1)  # [H, L, D]
        kb = kd[a:b].transpose(0, 1).repeat_interleave(groups, 0)  # [H, L, D]
        vb = vd[a:b].transpose(0, 1).repeat_interleave(groups, 0)  # [H, L, D]
        s = (qb @ kb.transpose(1, 2)) * scale  # [H, L, L]
        s = s.masked_fill(torch.ones(b - a, b - a, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        p = torch.exp(s - s.amax(-1, keepdim=True))  # [H, L, L] in [0, 1]
        p8 = (p * P_SCALE).to(FP8).float() / P_SCALE  # the e4m3 P of P·V
        out[a:b] = ((p8 @ vb) / p.sum(-1, keepdim=True)).transpose(0, 1).to(q.dtype)  # [L, H, D]
    return out


def want_fp8_attention(requested: bool, quantization: str, device: torch.device, prefill_kernel: str,
                       head_dim: int) -> str:
    """The prefill kernel with model.fp8_attention applied to the one resolved without it (prefill_kernel):
    off -> unchanged; on -> "triton_fp8" on CUDA (compute capability >= 8.9, where the Triton prefill kernel
    runs, head size >= 32), "fp8_emulated" off CUDA (the reference backend's fp32 emulation)."""
    if not requested:
        return prefill_kernel
    if quantization != "fp8":
        raise EngineSettingError("model.fp8_attention", f"needs model.quantization = fp8 (here {quantization!r})",
                                 "false, or true with model.quantization = fp8")
    if device.type != "cuda":
        return "fp8_emulated"
    cc = torch.cuda.get_device_capability(device)
    if cc < (8, 9):
        raise EngineSettingError("model.fp8_attention", f"needs compute capability >= 8.9 (here "
                                 f"{'.'.join(map(str, cc))})", "false")
    if prefill_kernel != "triton" or head_dim < MIN_HEAD_DIM:
        raise EngineSettingError("model.fp8_attention", f"needs the Triton prefill kernel and a head size >= "
                                 f"{MIN_HEAD_DIM} (here prefill kernel {prefill_kernel}, head size {head_dim})",
                                 "false")
    return "triton_fp8"
