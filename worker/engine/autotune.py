"""Phase 0: the largest safe token budget for this model + GPU + dtype + max_new_tokens.

Memory grows linearly with a bin's weight (KV slots, token table, decode logits) on top of a
fixed part (weights, prefill activations bounded by the chunk size, graphs). Two probes with
real prefill and decode steps fit that line; the budget is where the line meets `margin` of the
GPU's memory; a third probe at that budget confirms it (an OOM shrinks it by 15% and retries).
The result is cached on disk by (model, config hash, GPU, dtype, max_new_tokens, torch version,
chunk size, merged projections).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CPU_BUDGET = 32_768  # no device memory to probe on CPU: a bin this size stays interactive


def cache_key(eng, max_new_tokens: int) -> dict[str, str | int]:
    cfg_hash = hashlib.sha256(eng.model.config.to_json_string(use_diff=False).encode()).hexdigest()[:16]
    gpu = torch.cuda.get_device_name(eng.device) if eng.device.type == "cuda" else "cpu"
    return {"model": eng.name, "config": cfg_hash, "gpu": gpu, "dtype": str(eng.dtype),
            "max_new_tokens": int(max_new_tokens), "torch": torch.__version__, "chunk_tokens": eng.options.chunk_tokens,
            "merged": int(bool(getattr(eng, "merged", False)))}  # merged gate/up: a wider activation at the peak


def default_cache_path() -> Path:
    root = os.environ.get("RIBBON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ribbon")
    return Path(root) / "autotune.json"


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _probe_bin(weight: int, max_new: int, doc_len: int, vocab: int) -> tuple[torch.Tensor, list[int]]:
    """A bin of documents of doc_len tokens (the last one shorter) whose weight is about `weight`."""
    per = doc_len + max_new
    n = max(1, weight // per)
    lens = [doc_len] * n
    rest = weight - n * per - max_new
    if rest > 0:
        lens.append(rest)
    cu = [0]
    for n_tok in lens:
        cu.append(cu[-1] + n_tok)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (cu[-1],), generator=gen, dtype=torch.int64)  # [T]
    return tokens, cu


def _peak_for(eng, weight: int, max_new: int, doc_len: int, steps: int) -> int:
    """Peak device bytes of one real bin of this weight (raises OutOfMemoryError)."""
    eng.free()
    torch.cuda.reset_peak_memory_stats(eng.device)
    tokens, cu = _probe_bin(weight, max_new, doc_len, eng.model.config.vocab_size)
    eng.trial(tokens, cu, step_limit=steps)
    torch.cuda.synchronize(eng.device)
    return torch.cuda.max_memory_allocated(eng.device)


def search_budget(eng, max_new: int, margin: float = 0.88, max_budget: int = 1 << 19, doc_len: int = 1024,
                  steps: int = 16) -> tuple[int, dict]:
    """Fit peak(weight) = a + b * weight from two probes, solve for margin * capacity, confirm."""
    total = torch.cuda.get_device_properties(eng.device).total_memory
    w1 = 4 * (doc_len + max_new)
    w2 = max(w1 * 4, min(max_budget, 65_536))
    p1 = _peak_for(eng, w1, max_new, doc_len, steps)
    p2 = _peak_for(eng, w2, max_new, doc_len, steps)
    slope = max(1.0, (p2 - p1) / (w2 - w1))
    budget = int(min(max_budget, w2 + (margin * total - p2) / slope))
    tries = []
    while budget > w1:
        try:
            peak = _peak_for(eng, budget, max_new, doc_len, steps)
            tries.append({"budget": budget, "peak_bytes": peak})
            break
        except torch.cuda.OutOfMemoryError:
            tries.append({"budget": budget, "oom": True})
            budget = int(budget * 0.85)
    eng.free()
    info = {"probe_peaks": [[w1, p1], [w2, p2]], "bytes_per_token": slope, "total_bytes": total, "tries": tries}
    return max(budget, w1), info


def autotune_budget(eng, max_new_tokens: int | None = None, override: int | None = None,
                    cache_path: str | Path | None = None, refresh: bool = False, **search_kwargs) -> int:
    """The token budget: `override` if given, else cached, else measured (and cached)."""
    if override is not None:
        return int(override)
    max_new = int(max_new_tokens if max_new_tokens is not None else eng.options.max_new_tokens)
    if eng.device.type != "cuda":
        return CPU_BUDGET
    path = Path(cache_path) if cache_path is not None else default_cache_path()
    key = json.dumps(cache_key(eng, max_new), sort_keys=True)
    cache = _load(path)
    if not refresh and key in cache:
        return int(cache[key]["budget"])
    t0 = time.perf_counter()
    saved = eng.options.max_new_tokens
    eng.free()
    eng.options.max_new_tokens = eng.pool.max_new = max_new
    try:
        budget, info = search_budget(eng, max_new, **search_kwargs)
    finally:
        eng.free()
        eng.options.max_new_tokens = eng.pool.max_new = saved
    info.update(budget=budget, seconds=round(time.perf_counter() - t0, 2))
    cache[key] = info
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    tmp.replace(path)
    log.info("autotuned token budget", extra={"budget": budget, "seconds": info["seconds"]})
    return budget
