"""The decode GEMM kernel (decode_gemm_kernel.py) on a CUDA GPU: against cuBLAS and an exact product at the
decode layer shapes of Qwen2.5-7B, inside a CUDA graph, and the tiny engine with decode_gemm = triton.

Tolerance (as tests/engine/test_decode_gemm.py derives it): per element (K + 2) 2^-24 (|x| |w|^T + |b|) for the
fp32 accumulation plus 2^-8 |y| for the bf16 output's rounding.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs on the H200)"),
]

SHAPES = [(4_608, 3_584, True), (3_584, 3_584, False), (37_888, 3_584, False), (3_584, 18_944, False)]  # N, K, bias


def _operands(m: int, n: int, k: int, bias: bool, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, k, device="cuda", generator=g).bfloat16()  # [M, K]
    w = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).bfloat16()  # [N, K]
    b = torch.randn(n, device="cuda", generator=g).bfloat16() if bias else None  # [N]
    return x, w, b


def _within_bound(y: torch.Tensor, x, w, b) -> bool:
    exact = x.double() @ w.double().T + (b.double() if b is not None else 0)  # [M, N]
    scale = x.double().abs() @ w.double().abs().T + (b.double().abs() if b is not None else 0)
    bound = (x.shape[1] + 2) * 2.0**-24 * scale + 2.0**-8 * exact.abs()
    return bool(((y.double() - exact).abs() <= bound).all())


@pytest.mark.parametrize("n,k,bias", SHAPES)
@pytest.mark.parametrize("m", [1, 16, 96, 255])
def test_the_kernel_matches_an_exact_product_and_cublas(m, n, k, bias):
    from worker.engine.decode_gemm_kernel import linear

    x, w, b = _operands(m, n, k, bias)
    y = linear(x, w, b)  # [M, N]
    assert y.dtype == torch.bfloat16 and y.shape == (m, n)
    assert _within_bound(y, x, w, b)
    ref = nn.functional.linear(x, w, b)  # cuBLAS, bf16 out: both round a near-equal fp32 sum once
    torch.testing.assert_close(y.float(), ref.float(), rtol=2.0**-7, atol=1e-2)


def test_the_kernel_replays_in_a_cuda_graph_with_the_same_bits():
    from worker.engine.decode_gemm_kernel import linear

    n, k, _ = SHAPES[3]  # down_proj: split-K, a workspace from the graph's pool
    x, w, _ = _operands(96, n, k, False)
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        linear(static_x, w, None)  # warm-up: compiles
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = linear(static_x, w, None)  # [96, N]
    for seed in (1, 2):
        fresh, _, _ = _operands(96, n, k, False, seed)
        static_x.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_y, linear(fresh, w, None))  # deterministic: the graph's bits are eager's


def test_the_engine_with_the_kernel_agrees_with_blas(tmp_path):
    from worker.config.settings import ModelRun
    from worker.engine.loader import load_engine
    from worker.engine.tiny import make_tiny_checkpoint

    path = make_tiny_checkpoint(tmp_path / "q", "qwen2", seed=3)
    run = ModelRun(path=str(path), max_new_tokens=24, repetition_penalty=1.0, no_repeat_ngram=0, min_new_tokens=0,
                   stop_strings=())
    rng = random.Random(9)
    docs = [[rng.randrange(4, 400) for _ in range(rng.randint(1, 300))] for _ in range(48)]
    outs = {}
    for choice in ("triton", "blas"):
        e = load_engine(run, device="cuda", decode_gemm=choice)
        assert e.decode_gemm == choice
        cu = [0]
        for d in docs:
            cu.append(cu[-1] + len(d))
        staged = e.stage(torch.tensor(sum(docs, []), dtype=torch.int32), torch.tensor(cu, dtype=torch.int32),
                         max(len(d) for d in docs))
        outs[choice] = [g.token_ids for g in e.generate(staged)]
        assert e.runner.captures >= 1
    agree = total = 0
    for a, b in zip(outs["triton"], outs["blas"]):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        agree, total = agree + n, total + max(len(a), len(b))
    print(f"decode GEMMs through the kernel vs BLAS, bf16: {agree / total:.3f} of tokens agree (common prefix)")
    assert agree / total > 0.8  # bf16 rounding differs at near-ties: the bar test_gpu_engine.py holds cuBLASLt to
