"""Token choice: greedy, or seeded temperature/top-p sampling with no host sync.

Sampling is Gumbel-max with noise from a counter-based hash of (document seed, token index,
vocabulary id), so a document's output depends only on its own seed and logits: the same
message gives the same summary whatever bin it lands in, on CPU and GPU alike.
"""

from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (int64 tensors holding values < 2**32)."""
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _M32
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _M32
    return x ^ (x >> 16)


def uniform_noise(seeds: torch.Tensor, step: torch.Tensor, vocab: int) -> torch.Tensor:
    """seeds, step: int64 [B] -> float32 [B, V] in (0, 1), a pure function of its inputs."""
    base = _mix((seeds & _M32) ^ _mix((step * 0x9E3779B1) & _M32))  # [B]
    ids = torch.arange(vocab, device=seeds.device, dtype=torch.int64)  # [V]
    h = _mix(base[:, None] ^ ((ids[None, :] * 0x85EBCA6B) & _M32))  # [B, V]
    return (h.to(torch.float64) + 0.5).div_(2.0**32).to(torch.float32)


def choose_tokens(logits: torch.Tensor, temperature: float, top_p: float, seeds: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """logits: [B, V]; seeds, step: int64 [B] -> int64 [B]."""
    if temperature <= 0.0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature  # [B, V]
    if top_p < 1.0:
        probs, order = torch.softmax(scores, dim=-1).sort(dim=-1, descending=True)  # [B, V]
        before = probs.cumsum(dim=-1) - probs  # mass strictly before each token
        drop_sorted = before >= top_p  # the first token is always kept
        drop = torch.zeros_like(drop_sorted).scatter_(1, order, drop_sorted)  # [B, V]
        scores = scores.masked_fill(drop, float("-inf"))
    gumbel = -torch.log(-torch.log(uniform_noise(seeds, step, scores.shape[-1])))  # [B, V]
    return (scores + gumbel).argmax(dim=-1)
