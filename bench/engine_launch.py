"""The engine's decode launch choices for one generation job of bench/engine.py, set and restored.

`--compare-decode-launch` runs the same job once per entry of DECODE_LAUNCH (after the profile, which
replays the graphs the default job captured); `--compare-cublaslt` runs it with every GEMM under cuBLASLt.
"""

from __future__ import annotations

import contextlib

import torch

from worker.engine.decode import want_kv_write
from worker.engine.decode_gemm import install_decode_gemms, remove_decode_gemms

DECODE_LAUNCH = {  # system name -> launch_choices' arguments, in the order they run (a stage cut short keeps the first)
    # the step's layer GEMMs through the Triton kernel (decode_gemm.py) with the kernel storing K/V, then the
    # same with gate/up on BLAS (cuBLAS read its weights at 3.82 TB/s in the committed decode profile)
    "ribbon_decode_gemm": {"kv_write": "fused", "gemm": "triton"},
    "ribbon_decode_gemm_no_gate_up": {"kv_write": "fused", "gemm": "triton", "gemm_skip": ("merged_gate_up",)},
    # the decode kernel storing K/V, the step under cuBLASLt, a token-major then a head-major KV pool
    "ribbon_decode_launch_token": {"kv_write": "fused", "decode_blas": "cublaslt", "layout": "token"},
    "ribbon_decode_launch": {"kv_write": "fused", "decode_blas": "cublaslt", "layout": "head"},
    # the Triton GEMMs with index_copy_ storing K/V
    "ribbon_decode_gemm_separate": {"kv_write": "separate", "gemm": "triton"},
}


@contextlib.contextmanager
def launch_choices(eng, blas: str | None = None, kv_write: str | None = None, decode_blas: str | None = None,
                   layout: str | None = None, gemm: str | None = None, gemm_skip: tuple[str, ...] = ()):
    """eng as asked for one job, as it was after. blas: every GEMM of the job through this library;
    kv_write: EngineOptions.decode_kv_write's values; decode_blas: the step's BLAS library; layout: the KV
    pool's storage order (kvcache.KVPool.layout); gemm "triton": the step's layer GEMMs through the kernel,
    but those named in gemm_skip (decode_gemm.install_decode_gemms)."""
    saved_blas = torch.backends.cuda.preferred_blas_library()
    saved = (eng.write_new, eng.decode_blas, eng.decode_gemm)
    saved_layout = eng.pool.layout
    installed = gemm == "triton" and eng.decode_gemm != "triton"
    changed = bool(blas or kv_write or decode_blas or installed or (layout and layout != saved_layout))
    if not changed:  # the default job: the graphs it captures stay (the profile replays them)
        yield
        return
    if blas:
        torch.backends.cuda.preferred_blas_library(blas)
    if kv_write:
        eng.write_new = want_kv_write(kv_write, eng.backend)
    eng.decode_blas = decode_blas or eng.decode_blas
    if installed:
        install_decode_gemms(eng.base, gemm_skip)
        eng.decode_gemm = "triton"
    if layout and layout != saved_layout:
        eng.free()  # the pool is allocated again by the job's warm-up, in this layout
        eng.pool.layout = layout
    eng.runner.clear()  # graphs captured with other kernels
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(saved_blas)
        eng.write_new, eng.decode_blas, eng.decode_gemm = saved
        if installed:
            remove_decode_gemms(eng.base)
        if eng.pool.layout != saved_layout:
            eng.free()
            eng.pool.layout = saved_layout
        eng.runner.clear()
