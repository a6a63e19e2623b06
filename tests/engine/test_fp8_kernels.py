"""The FP8 prefill's quantization kernels on the CPU through Triton's interpreter: the row quantization
(fp8_quant_kernel.py, op ribbon::quant_rows, Fp8Gemm.quant = "kernel") bit for bit against quantize_rows'
fp32 math, and the chunked SiLU-multiply-quantize launch (fp8_kernel.py, Fp8Mlp.kernel = "chunked") bit for
bit against one_pass and two_pass; then their wiring (the ops traced by torch.compile, the sites quantize_layers
names). Their speed is the H200's (bench/fp8_prefill.py --variants kernels).

The interpreter (TRITON_INTERPRET=1, read when triton is imported) runs in a fresh process (`python this_file
...`) whose fp32 -> e4m3 conversion is made exact (interpreted.exact_e4m3_conversion says why).
"""

from __future__ import annotations

import json
import sys

import torch

from worker.config.settings import ModelRun
from worker.engine.fp8 import (QUANT_KERNEL_SITES, Fp8Gemm, fp8_gemms, fp8_mlps, quant_rows, quantize_rows,
                               silu_mul_quant)
from worker.engine.loader import load_engine
from worker.engine.tiny import make_tiny_checkpoint

# (rows, columns): columns off a power of two, rows off a multiple of the rows a program takes
QUANT_SHAPES = [(1, 7), (37, 3000), (5, 3584), (33, 100), (3, 8192), (20, 896)]
SILU_WIDTHS = [(7, 100), (5, 1000), (4, 4864), (3, 5000), (2, 18_944)]  # (rows, I): one chunk to 5 x 4,096


def _rows(m: int, k: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Rows of every kind quantize_rows meets: unit-normal rows at scales 1e-3..1e3, a row of zeros (the 1e-12
    floor), one far below that floor, one near the dtype's largest value, one with a single nonzero value, and
    a row whose amax is 448 holding values half-way between two e4m3 codes (round to nearest even)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.logspace(-3, 3, m)[:, None]
    special = [torch.zeros(k), torch.randn(k, generator=g) * 1e-14,
               torch.randn(k, generator=g).clamp(-1, 1) * torch.finfo(dtype).max / 2,
               torch.zeros(k).index_fill_(0, torch.tensor([k // 2]), -3.0)]
    ties = torch.tensor([448.0, 1.0625, -1.1875, 3.25, -0.0, 0.0048828125, 0.013671875, 208.0])
    special.append(ties.repeat(k // len(ties) + 1)[:k])
    for r, row in zip(range(1, m, 2), special):
        x[r] = row
    return x.to(dtype)


def _codes(q: torch.Tensor) -> torch.Tensor:
    return q.view(torch.uint8)


def _interpreted(*args: str) -> dict:
    from tests.engine import interpreted  # here: the child runs this file as a script, without tests/ on its path

    return interpreted.run(__file__, *args, timeout=900)


def test_the_row_quantization_kernel_is_quantize_rows_bit_for_bit():
    got = _interpreted("quant")
    assert len(got["cases"]) == 2 * len(QUANT_SHAPES) + 1
    for case in got["cases"]:
        assert case["codes_differ"] == 0 and case["scales_equal"], case
    assert any(case["zero_row_codes_zero"] for case in got["cases"])


def test_the_chunked_silu_mul_quant_kernel_is_one_pass_bit_for_bit():
    got = _interpreted("silu")
    assert len(got["cases"]) == 2 * len(SILU_WIDTHS)
    for case in got["cases"]:
        assert case["chunked_vs_one_pass"] == 0 and case["chunked_vs_two_pass"] == 0, case
        assert case["scales_equal"], case
        # torch's CPU silu against the kernel's exp formula: silu's last bit may differ and cross a bf16 rounding,
        # of the row's amax too (silu's step and the product's rounding: up to two bf16 steps of the scale), and a
        # row quantized at another scale differs by e4m3's own rounding (2**-4 at most, a value)
        assert case["scale_vs_torch"] < 2**-6 and case["dequantized_vs_torch"] < 2**-4, case
    widths = {c["i"]: c["chunks"] for c in got["cases"]}
    assert widths[18_944] == [4_096, 5] and widths[100] == [1_024, 1]


def test_the_quant_rows_op_is_the_torch_math_off_cuda_and_traces_with_dynamic_rows():
    x = _rows(40, 300, torch.bfloat16, seed=1)
    q, s = quant_rows(x)
    rq, rs = quantize_rows(x)
    assert torch.equal(_codes(q), _codes(rq)) and torch.equal(s, rs)
    traced = torch.compile(lambda t: torch.ops.ribbon.quant_rows(t), backend="aot_eager", dynamic=True,
                           fullgraph=True)  # the op's fake shapes
    for rows in (40, 17):
        tq, ts = traced(x[:rows])
        assert tq.shape == (rows, 300) and tq.dtype == torch.float8_e4m3fn and ts.shape == (rows, 1)
        assert torch.equal(_codes(tq), _codes(rq[:rows])) and torch.equal(ts, rs[:rows])
    gu = _rows(9, 2 * 64, torch.bfloat16, seed=2)
    ref = silu_mul_quant(gu, "one_pass")  # off CUDA every kernel is the torch math
    for name, got in (("chunked", silu_mul_quant(gu, "chunked")), ("two_pass", silu_mul_quant(gu, "two_pass"))):
        assert torch.equal(_codes(got[0]), _codes(ref[0])) and torch.equal(got[1], ref[1]), name


def test_the_kernel_quantization_is_on_at_its_sites_by_default_and_keeps_the_numerics_off_cuda(tmp_path):
    from engine_helpers import _docs, _stage  # tests/ is on pytest's path, not on the interpreted child's

    path = make_tiny_checkpoint(tmp_path / "m", arch="qwen2", seed=1)
    docs = _docs(12, 20, 60, 500, seed=3)
    eng = load_engine(ModelRun(path=str(path), max_new_tokens=4, quantization="fp8"), fp8_min_rows=64, merge="on")
    gemms = fp8_gemms(eng.base)
    layers = len(eng.base.layers)
    sites = [g.site for g in gemms]
    assert {g.site for g in gemms if g.quant == "kernel"} == {"merged_q_k_v", "o_proj"}  # the row kernel at its sites
    assert {g.quant for g in gemms if g.site not in QUANT_KERNEL_SITES} == {"fp32"}  # inductor's fusion elsewhere
    assert {m.kernel for m in fp8_mlps(eng.base)} == {"chunked"}
    assert sites.count("merged_q_k_v") == sites.count("o_proj") == sites.count("merged_gate_up") == layers
    assert sites.count("down_proj") == layers and all(s for s in sites)
    assert {"merged_q_k_v", "o_proj"} <= set(QUANT_KERNEL_SITES) and "merged_gate_up" not in QUANT_KERNEL_SITES
    before = eng.prefill_last_logits(_stage(eng, docs))  # [n, V]
    for g in gemms:
        g.quant = "fp32"
    for m in fp8_mlps(eng.base):
        m.kernel = "one_pass"
    after = eng.prefill_last_logits(_stage(eng, docs))  # off CUDA: the same torch math
    assert torch.equal(before, after)


def test_an_fp8_gemm_with_the_kernel_quantization_matches_the_fp32_one_off_cuda():
    g = torch.Generator().manual_seed(5)
    w, b, x = torch.randn(48, 64, generator=g), torch.randn(48, generator=g), torch.randn(3, 40, 64, generator=g)
    gemm = Fp8Gemm(w, b, min_rows=32)
    ref = gemm(x)
    gemm.quant = "kernel"
    assert torch.equal(gemm(x), ref)


# ---------------------------------------------------------------- run under TRITON_INTERPRET=1
def _quant_cases() -> dict:
    import interpreted  # this file's folder is the child's first path entry

    interpreted.exact_e4m3_conversion()
    from worker.engine import fp8_quant_kernel as qk

    out = []
    for n, (m, k) in enumerate(QUANT_SHAPES):
        for dtype in (torch.bfloat16, torch.float32):
            x = _rows(m, k, dtype, seed=n)
            out.append(_quant_case(qk, x, m, k, str(dtype)))
    wide = _rows(9, 300, torch.bfloat16, seed=99)
    x = torch.cat([wide, wide[:, :5]], dim=1)[:, :300]  # rows 305 apart: a strided view, unit column stride
    out.append(_quant_case(qk, x, 9, 300, "bfloat16 strided"))
    return {"cases": out}


def _quant_case(qk, x: torch.Tensor, m: int, k: int, dtype: str) -> dict:
    q = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    s = torch.empty(m, 1)
    qk.launch(x, q, s)
    rq, rs = quantize_rows(x, "fp32")
    return {"m": m, "k": k, "dtype": dtype, "rows_per_program": qk.launch_shape(k)[0],
            "codes_differ": int((_codes(q) != _codes(rq)).sum()), "scales_equal": torch.equal(s, rs),
            "zero_row_codes_zero": m > 1 and bool((_codes(q[1]) == 0).all())}


def _silu_cases() -> dict:
    import interpreted  # this file's folder is the child's first path entry

    interpreted.exact_e4m3_conversion()
    from worker.engine import fp8_kernel as fk

    out = []
    for n, (m, i) in enumerate(SILU_WIDTHS):
        for dtype in (torch.bfloat16, torch.float32):
            gu = _rows(m, 2 * i, torch.float32, seed=10 + n).clamp(-1e30, 1e30)  # h finite: no inf in a row
            gu[:, :i] = gu[:, :i].clamp(-80, 80)  # gates past |80|: silu's exp overflows alike, nothing to compare
            gu = gu.to(dtype)
            got = {}
            for kernel in ("chunked", "one_pass", "two_pass"):
                q, s = torch.empty(m, i, dtype=torch.float8_e4m3fn), torch.empty(m, 1)
                fk.launch(gu, q, s, kernel)
                got[kernel] = (_codes(q), s)
            rq, rs = silu_mul_quant(gu, "chunked")  # torch on the CPU
            c, cs = got["chunked"]
            out.append({"m": m, "i": i, "dtype": str(dtype), "chunks": list(fk.chunk_shape(i)),
                        "chunked_vs_one_pass": int((c != got["one_pass"][0]).sum()),
                        "chunked_vs_two_pass": int((c != got["two_pass"][0]).sum()),
                        "scales_equal": torch.equal(cs, got["one_pass"][1]) and torch.equal(cs, got["two_pass"][1]),
                        "scale_vs_torch": ((cs - rs).abs() / rs).max().item(),
                        "dequantized_vs_torch": ((c.view(torch.float8_e4m3fn).float() * cs - rq.float() * rs).norm()
                                                 / (rq.float() * rs).norm()).item()})
    return {"cases": out}


if __name__ == "__main__":
    print(json.dumps(_quant_cases() if sys.argv[1] == "quant" else _silu_cases()))
