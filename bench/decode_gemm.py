"""`python -m bench.decode_gemm`: decode's skinny GEMMs alone, cuBLAS, cuBLASLt and the Triton kernel.

    python -m bench.decode_gemm --out $OUT [--ms 16,32,64,96,128,192,256] [--sweep-m 96] [--calls 20]

At each layer shape of Qwen2.5-7B's decode step (SHAPES: the merged q/k/v with its bias, o_proj, the merged
gate/up, down_proj; bf16) and each row count M: y = x @ W^T + b by F.linear under cuBLAS and under cuBLASLt
(torch.backends.cuda.preferred_blas_library while the graph is captured, as decode.blas_library does) and
by worker/engine/decode_gemm_kernel.py at its launch_config. Each is timed as decode runs it: `--calls`
calls captured in one CUDA graph, replayed `--replays` times (CUDA events, the median replay over the
calls). The calls cycle over enough copies of the weights (>= FLUSH_BYTES together) that each reads its
weight from memory, not L2, as a decode layer does. Reported per system: us a call, TB/s of weight bytes,
and the max abs and relative (over max |y|) error against the fp32 product of the same bf16 operands.
At M = --sweep-m the kernel also runs at every K split of SPLITS, and at BN64_SPLITS with 64-column W tiles
(the launch table's input for a device).
Writes decode_gemm_<gpu>.json (after every shape, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
from torch import nn

from bench.results_io import command_line, machine_name, save
from worker.engine.decode import blas_library

SHAPES = {"qkv": (4_608, 3_584, True), "o_proj": (3_584, 3_584, False), "gate_up": (37_888, 3_584, False),
          "down_proj": (3_584, 18_944, False)}  # name -> N, K, bias (Qwen2.5-7B, merged projections)
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
BN64_SPLITS = (1, 2, 4)  # the splits also swept with 64-column W tiles
FLUSH_BYTES = 256 * 2**20  # the weights' copies together: several times the H100/H200's 50 MB L2


def _graph_us(call, calls: int, replays: int, blas: str | None = None) -> float:
    """us per call(i), i = 0..calls-1, captured in one CUDA graph (under `blas`) and replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with blas_library(blas):
        with torch.cuda.stream(side):
            for i in range(2):  # warm-up: compilation, BLAS workspaces
                call(i)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                call(i)
    graph.replay()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for a, b in ev:
        a.record()
        graph.replay()
        b.record()
    torch.cuda.synchronize()
    return sorted(a.elapsed_time(b) for a, b in ev)[replays // 2] * 1e3 / calls


def _errors(y: torch.Tensor, ref: torch.Tensor) -> dict:
    err = (y.float() - ref).abs().max().item()
    return {"max_abs_err": err, "max_rel_err": err / max(ref.abs().max().item(), 1e-30)}


def measure_shape(name: str, ms: list[int], args) -> dict:
    from worker.engine import decode_gemm_kernel as kernel  # noqa: PLC0415 triton: CUDA only

    n, k, has_bias = SHAPES[name]
    g = torch.Generator(device="cuda").manual_seed(0)
    wbytes = n * k * 2
    copies = max(1, -(-FLUSH_BYTES // wbytes))
    ws = [(torch.randn(n, k, device="cuda", generator=g) / k**0.5).bfloat16() for _ in range(copies)]  # [N, K] each
    bs = [torch.randn(n, device="cuda", generator=g).bfloat16() if has_bias else None for _ in range(copies)]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"n": n, "k": k, "bias": has_bias, "weight_bytes": wbytes, "weight_copies": copies, "rows": {}}
    for m in ms:
        x = torch.randn(m, k, device="cuda", generator=g).bfloat16()  # [M, K]
        ref = x.float() @ ws[0].float().T + (bs[0].float() if has_bias else 0)  # [M, N] fp32
        cfg = kernel.launch_config(m, n, k, sms)
        runs = {"cublas": (lambda i: nn.functional.linear(x, ws[i % copies], bs[i % copies]), "cublas"),
                "cublaslt": (lambda i: nn.functional.linear(x, ws[i % copies], bs[i % copies]), "cublaslt"),
                "triton": (lambda i, c=cfg: kernel.linear(x, ws[i % copies], bs[i % copies], c), None)}
        if m == args.sweep_m:
            for s in SPLITS:
                c = kernel.launch_config(m, n, k, sms, splits=s)
                if c.splits == s and c.splits != cfg.splits:  # a split the K-blocks allow, not the default's
                    runs[f"triton_splits{s}"] = (lambda i, c=c: kernel.linear(x, ws[i % copies], bs[i % copies], c), None)
                if c.splits == s and s in BN64_SPLITS:  # narrower W tiles: twice the programs at a split
                    c = dataclasses.replace(c, block_n=64)
                    runs[f"triton_bn64_splits{s}"] = (lambda i, c=c: kernel.linear(x, ws[i % copies], bs[i % copies], c),
                                                      None)
        row = {"triton_config": dataclasses.asdict(cfg)}
        for system, (call, blas) in runs.items():
            us = _graph_us(call, args.calls, args.replays, blas)
            with blas_library(blas):
                y = call(0)
            row[system] = {"us": us, "weight_tb_per_s": wbytes / (us * 1e-6) / 1e12} | _errors(y, ref)
        out["rows"][str(m)] = row
        print(f"{name} M={m}: " + ", ".join(f"{s} {v['us']:.1f} us" for s, v in row.items() if "us" in v), flush=True)
    ws.clear()  # the copies freed before the next shape's
    bs.clear()
    torch.cuda.empty_cache()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.decode_gemm", description=__doc__.splitlines()[0])
    p.add_argument("--ms", default="16,32,64,96,128,192,256", help="row counts M")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma list of: " + ", ".join(SHAPES))
    p.add_argument("--sweep-m", type=int, default=96, help="M at which the kernel runs at every split (0: none)")
    p.add_argument("--calls", type=int, default=20, help="GEMM calls captured in one graph")
    p.add_argument("--replays", type=int, default=5)
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default=None, help="file name (default decode_gemm_<gpu>.json)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        print("python -m bench.decode_gemm needs a CUDA GPU", file=sys.stderr)
        return 2
    shapes = [s for s in a.shapes.split(",") if s]
    if any(s not in SHAPES for s in shapes):
        print(f"--shapes: {a.shapes!r} names a shape not in {', '.join(SHAPES)}", file=sys.stderr)
        return 2
    path = Path(a.out) / (a.name or f"decode_gemm_{machine_name('cuda')}.json")
    result = {"command": command_line("bench.decode_gemm", argv), "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "shapes": {}}
    for name in shapes:
        result["shapes"][name] = measure_shape(name, [int(m) for m in a.ms.split(",") if m], a)
        save(path, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
