"""The decode step's GEMMs through the Triton kernel (decode_gemm.py, decode_gemm_kernel.py) on the CPU.

The kernel runs through Triton's interpreter (TRITON_INTERPRET=1, read when triton is imported) in a fresh
interpreter (`python this_file ...`) whose bf16 casts and dots are made the GPU's (interpreted.py).

Tolerance of the kernel against an fp64 reference, per output element: a K-term dot product summed in fp32
(in any order: per K-block in the MMA, over blocks, over splits) is off by at most (K + 1) u |x| |w|^T with
u = 2^-24 (Higham's bound, the products themselves rounded once in fp32: exact for bf16 inputs), the bias
add one more u, and the final rounding to the output's dtype u_out |y| (2^-8 for bf16, 2^-24 for fp32).
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
from torch import nn

from worker.engine import decode_gemm
from worker.engine.decode import StepConfig, StepRunner
from worker.engine.decode_gemm import (
    DecodeGemm,
    install_decode_gemms,
    kernel_gemms,
    remove_decode_gemms,
    want_decode_gemm,
)
from worker.engine.errors import EngineSettingError
from worker.engine.tiny import make_tiny_checkpoint


def _interpreted(*args: str) -> dict:
    from tests.engine import interpreted  # here: the child runs this file as a script, without tests/ on its path

    return interpreted.run(__file__, *args, timeout=600)


def test_the_kernel_is_within_fp32_accumulation_of_the_exact_product():
    got = _interpreted("kernel")
    for case in got["cases"]:
        assert case["within_bound"], case  # every element within the bound the module docstring derives
        assert case["same_bits_twice"], case  # the split-K reduction is deterministic
    seen = {(c["m"], c["n"], c["k"]) for c in got["cases"]}
    assert (1, 70, 100) in seen and (96, 200, 2_112) in seen  # one row, and rows and K off the blocks
    assert {c["splits"] for c in got["cases"]} >= {1, 2, 3} and {c["dtype"] for c in got["cases"]} == {"bf16", "fp32"}
    assert {c["bias"] for c in got["cases"]} == {True, False}


def test_the_engine_decodes_the_same_tokens_with_the_kernel(tmp_path):
    path = make_tiny_checkpoint(tmp_path / "q", "qwen2", seed=2)
    got = _interpreted("engine", str(path))
    for merge in ("off", "on"):
        kernel, blas = got[f"triton_{merge}"], got[f"blas_{merge}"]
        assert kernel["decode_gemm"] == "triton" and blas["decode_gemm"] == "blas"
        assert kernel["tokens"] == blas["tokens"], merge
        assert blas["kernel_calls"] == 0
        # the decode step's GEMMs only: every call has a decode bucket's rows, none a prefill's 90+ tokens
        assert kernel["kernel_calls"] > 0 and max(kernel["kernel_rows"]) <= 6, kernel
        assert kernel["gemms"] == (7 if merge == "off" else 4) * 2  # per layer: q k v o gate up down / qkv o gu down


def test_settings_resolve_and_refuse_unknown_values(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert want_decode_gemm("auto", cuda) == "blas" and want_decode_gemm("blas", cuda) == "blas"
    assert want_decode_gemm("triton", cuda) == "triton"
    assert want_decode_gemm("triton", cpu) == "blas"  # the CPU keeps torch's math
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert want_decode_gemm("triton", cpu) == "triton"  # Triton's interpreter runs it (the tests above)
    with pytest.raises(EngineSettingError) as err:
        want_decode_gemm("cutlass", cuda)
    assert err.value.setting == "decode_gemm"


def test_the_op_is_torch_math_off_cuda_and_traces_with_dynamic_rows(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(9, 40, generator=g), torch.randn(24, 40, generator=g), torch.randn(24, generator=g)
    assert torch.equal(torch.ops.ribbon.decode_linear(x, w, b), nn.functional.linear(x, w, b))
    traced = torch.compile(lambda t: torch.ops.ribbon.decode_linear(t, w, None), backend="aot_eager", dynamic=True,
                           fullgraph=True)  # the op's fake shapes
    for rows in (9, 5):
        assert torch.equal(traced(x[:rows]), nn.functional.linear(x[:rows], w))


def test_a_compiled_layer_calls_the_kernel_only_inside_the_switch_and_for_few_rows(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    graphs = []

    def backend(gm, inputs):  # records each graph dynamo builds
        graphs.append("ribbon.decode_linear" in str(gm.graph))
        return gm.forward

    lin = nn.Linear(32, 48)
    layer = torch.compile(DecodeGemm(lin.weight, lin.bias, lin), backend=backend, dynamic=True)
    x = torch.randn(300, 32)
    with torch.no_grad():
        want = lin(x)
        assert torch.equal(layer(x[:40]), want[:40]) and graphs == [False]  # off: what it holds
        with kernel_gemms(True):
            assert torch.allclose(layer(x[:40]), want[:40]) and graphs == [False, True]  # on: the op (dynamo's guard)
            assert torch.allclose(layer(x[:7]), want[:7]) and graphs == [False, True]  # same graph, other rows
            assert torch.equal(layer(x), want) and graphs[-1] is False  # 300 rows > MAX_ROWS: BLAS
        n = len(graphs)
        assert torch.equal(layer(x[:40]), want[:40]) and len(graphs) == n  # off again: the first graph, no rebuild


@pytest.mark.parametrize("merge", ["off", "on"])
def test_install_wraps_every_layer_gemm_once_and_changes_nothing_off(tmp_path, merge):
    from engine_helpers import _docs, _engine, _stage

    path = make_tiny_checkpoint(tmp_path / "m", "qwen2", seed=1)
    eng = _engine(path, merge=merge, quantization="fp8", fp8_min_rows=64)  # fp8's wrappers too
    docs = _docs(3, 20, 40, 500, seed=3)  # 60-120 rows: FP8 above 64, bf16 weights below

    def logits():
        return eng.prefill_last_logits(_stage(eng, docs))  # [3, V]

    before = logits()
    n = install_decode_gemms(eng.base)
    assert n == (7 if merge == "off" else 4) * len(eng.base.layers) and install_decode_gemms(eng.base) == 0
    assert torch.equal(logits(), before)
    with kernel_gemms(True):  # the CPU without the interpreter: the op is F.linear, the same bits
        assert torch.equal(logits(), before)
    wrapped = [m for m in eng.base.modules() if isinstance(m, DecodeGemm)]
    assert len(wrapped) == n and all(m.inner is not None for m in wrapped)  # fp8's GEMM kept behind each
    assert {m.max_rows for m in wrapped} == {63}  # below fp8_min_rows: FP8 calls stay FP8 with the kernel on
    remove_decode_gemms(eng.base)
    assert not any(isinstance(m, DecodeGemm) for m in eng.base.modules()) and torch.equal(logits(), before)
    skip = ("gate_proj", "up_proj") if merge == "off" else ("merged_gate_up",)
    assert install_decode_gemms(eng.base, skip) == n - len(skip) * len(eng.base.layers)  # gate/up left to BLAS
    remove_decode_gemms(eng.base)
    assert install_decode_gemms(eng.base) == n  # and back again


def test_the_runner_switches_the_kernel_around_the_step_only(monkeypatch):
    import worker.engine.decode as decode

    seen = []
    monkeypatch.setattr(decode, "decode_step", lambda *a: seen.append(decode_gemm._ON))
    runner = StepRunner(None, None, None, use_graphs=False, marker=None)
    eos = torch.tensor([1])
    runner.run(None, None, StepConfig(4, 0.0, 1.0, eos, 1, gemm="triton"))
    runner.run(None, None, StepConfig(4, 0.0, 1.0, eos, 1))
    assert seen == [True, False] and decode_gemm._ON is False


# ---------------------------------------------------------------- run under TRITON_INTERPRET=1
def _kernel_cases() -> dict:
    from worker.engine.decode_gemm_kernel import launch_config, linear

    gen = torch.Generator().manual_seed(0)
    cases = []
    shapes = [(1, 70, 100, None), (3, 130, 1_000, 2), (17, 257, 700, 3), (96, 200, 2_112, None), (130, 64, 128, 1)]
    for (m, n, k, splits), dtype, bias in [(s, d, b) for s in shapes for d in (torch.bfloat16, torch.float32)
                                           for b in (True, False)]:
        x = torch.randn(m, k, generator=gen).to(dtype)  # [M, K]
        w = (torch.randn(n, k, generator=gen) / 8).to(dtype)  # [N, K]
        b = torch.randn(n, generator=gen).to(dtype) if bias else None  # [N]
        cfg = launch_config(m, n, k, 132, splits)
        y = linear(x, w, b, cfg)  # [M, N]
        exact = x.double() @ w.double().T + (b.double() if bias else 0)  # [M, N]
        scale = x.double().abs() @ w.double().abs().T + (b.double().abs() if bias else 0)
        u_out = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-24
        bound = (k + 2) * 2.0**-24 * scale + u_out * exact.abs()
        cases.append({"m": m, "n": n, "k": k, "splits": cfg.splits, "bias": bias,
                      "dtype": "bf16" if dtype == torch.bfloat16 else "fp32",
                      "within_bound": bool(((y.double() - exact).abs() <= bound).all()),
                      "same_bits_twice": torch.equal(y, linear(x, w, b, cfg))})
    return {"cases": cases}


def _engine_runs(path: str) -> dict:
    from engine_helpers import _docs, _engine, _stage
    from worker.engine import decode_gemm_kernel as kernel

    rows = []
    launch = kernel.linear

    def counted(x, weight, bias, cfg=None, sms=None):
        rows.append(x.shape[0])
        return launch(x, weight, bias, cfg, sms)

    kernel.linear = counted
    out = {}
    for merge in ("off", "on"):
        for choice in ("triton", "blas"):
            eng = _engine(path, max_new_tokens=6, merge=merge, decode_gemm=choice)
            rows.clear()
            docs = _docs(5, 90, 120, eng.model.config.vocab_size, seed=4)
            gens = eng.generate(_stage(eng, docs))
            out[f"{choice}_{merge}"] = {
                "tokens": [g.token_ids for g in gens], "decode_gemm": eng.decode_gemm, "kernel_calls": len(rows),
                "kernel_rows": rows[:] or [0], "gemms": sum(isinstance(m, DecodeGemm) for m in eng.base.modules())}
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: engine_helpers
    import interpreted  # noqa: PLC0415 this file's folder is the child's first path entry

    interpreted.exact_bf16_arithmetic()
    print(json.dumps(_kernel_cases() if sys.argv[1] == "kernel" else _engine_runs(sys.argv[2])))
