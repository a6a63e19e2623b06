"""Per-kernel profiles for the engine benchmarks (torch.profiler, CUDA time per kernel)."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as prof


def profile(fn, path: Path, rows: int = 40) -> dict:
    """Run fn under torch.profiler; write the per-kernel table to path; return the top kernels (CUDA us)."""
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    ka = p.key_averages()
    attr = "self_device_time_total" if hasattr(ka[0], "self_device_time_total") else "self_cuda_time_total"
    path.write_text(ka.table(sort_by=attr, row_limit=rows))
    kern = sorted((e for e in ka if "CUDA" in str(getattr(e, "device_type", ""))), key=lambda e: -getattr(e, attr))
    total = sum(getattr(e, attr) for e in kern)
    return {"wall_s": wall, "kernel_us_total": total,
            "top": [{"name": e.key[:120], "us": getattr(e, attr), "calls": e.count,
                     "share": getattr(e, attr) / max(total, 1)} for e in kern[:rows]]}


def profile_engine(eng, docs: list[list[int]], gen_docs: list[list[int]], out: Path, tag: str, stage) -> dict:
    """One prefill bin of the first 24 documents (~32k tokens of the stress mix) and one generation of
    gen_docs, each profiled; tables in out/engine_profile_{prefill,generate}_<tag>.txt."""
    n = min(24, len(docs))
    return {"prefill": profile(lambda: eng.prefill_last_logits(stage(eng, docs, list(range(n)))),
                               out / f"engine_profile_prefill_{tag}.txt"),
            "generate": profile(lambda: eng.generate(stage(eng, gen_docs, list(range(len(gen_docs))))),
                                out / f"engine_profile_generate_{tag}.txt")}
