"""Hugging Face baselines for the engine benchmark: padded batches (sdpa) and continuous batching."""

from __future__ import annotations

import time

import torch
from transformers import GenerationConfig


def _sync() -> None:
    torch.cuda.synchronize()


def _left_padded(batch: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(d) for d in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.int64)  # [b, L]
    mask = torch.zeros((len(batch), width), dtype=torch.int64)  # [b, L]
    for r, d in enumerate(batch):
        ids[r, width - len(d):] = torch.tensor(d)
        mask[r, width - len(d):] = 1
    return ids.to(device), mask.to(device)


def _batches(docs: list[list[int]], size: int):
    return [docs[i:i + size] for i in range(0, len(docs), size)]


@torch.inference_mode()
def hf_prefill(model, docs: list[list[int]], batch: int = 8, pad_id: int = 0) -> dict:
    """Padded batches in arrival order, sdpa, logits only at the last position (logits_to_keep=1)."""
    model.set_attn_implementation("sdpa")
    dev = next(model.parameters()).device
    warm = _left_padded(docs[:batch], pad_id, dev)
    model(input_ids=warm[0], attention_mask=warm[1], use_cache=False, logits_to_keep=1)
    _sync()
    torch.cuda.reset_peak_memory_stats()
    real = padded = 0
    t0 = time.perf_counter()
    for b in _batches(docs, batch):
        ids, mask = _left_padded(b, pad_id, dev)
        model(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=1)
        real += sum(len(d) for d in b)
        padded += ids.numel()
    _sync()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "real_tokens": real, "tokens_per_s": real / wall, "padding_pct": 100.0 * (1 - real / padded),
            "peak_vram_gib": torch.cuda.max_memory_allocated() / 2**30}


def _count_new(rows: torch.Tensor, eos: set[int]) -> int:
    """rows: [b, new] generated ids (pad after eos) -> tokens generated up to and including eos."""
    total = 0
    for r in rows.tolist():
        n = len(r)
        for i, t in enumerate(r):
            if t in eos:
                n = i + 1
                break
        total += n
    return total


@torch.inference_mode()
def hf_generate(model, docs: list[list[int]], max_new: int, batch: int = 8, pad_id: int = 0) -> dict:
    """model.generate in padded batches of `batch`, greedy, sdpa, dynamic cache (eager decode)."""
    model.set_attn_implementation("sdpa")
    dev = next(model.parameters()).device
    eos = model.generation_config.eos_token_id
    eos_set = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    warm = _left_padded(docs[:2], pad_id, dev)
    model.generate(input_ids=warm[0], attention_mask=warm[1], max_new_tokens=4, do_sample=False, pad_token_id=pad_id)
    _sync()
    torch.cuda.reset_peak_memory_stats()
    out_tokens = 0
    t0 = time.perf_counter()
    for b in _batches(docs, batch):
        ids, mask = _left_padded(b, pad_id, dev)
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False, pad_token_id=pad_id)
        out_tokens += _count_new(out[:, ids.shape[1]:], eos_set)
    _sync()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "output_tokens": out_tokens, "output_tokens_per_s": out_tokens / wall,
            "batches": len(_batches(docs, batch)), "peak_vram_gib": torch.cuda.max_memory_allocated() / 2**30}


def hf_generate_batch(model, docs: list[list[int]], max_new: int) -> dict:
    """transformers' continuous batching (model.generate_batch), greedy; its warm-up is inside the wall time.

    Not under inference_mode: its generation thread updates cache tensors in place outside it."""
    model.set_attn_implementation("sdpa")
    gc = GenerationConfig(max_new_tokens=max_new, do_sample=False, eos_token_id=model.generation_config.eos_token_id,
                          pad_token_id=0)
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    res = model.generate_batch(inputs=docs, generation_config=gc, progress_bar=False)
    _sync()
    wall = time.perf_counter() - t0
    outs = list(res.values())
    out_tokens = sum(len(r.generated_tokens) for r in outs)
    errors = [r.error for r in outs if getattr(r, "error", None)]
    model.set_attn_implementation("sdpa")
    return {"wall_s": wall, "output_tokens": out_tokens, "output_tokens_per_s": out_tokens / wall,
            "finished": len(outs), "errors": errors[:3], "peak_vram_gib": torch.cuda.max_memory_allocated() / 2**30}
