"""bench/fp8_prefill.py's FP8 attention and quantization-kernel variants on the CPU: which variants a run takes,
and how a variant reaches the engine (its FP8 modules and its prefill kernel). The run itself is the H200's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.fp8_prefill import ATTENTION, KERNELS, VARIANTS, _apply, variant_names


def test_the_attention_spec_runs_the_default_variant_without_and_with_fp8_attention():
    default = "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass"
    assert variant_names("attention", default) == [default, default + ATTENTION]
    assert all(n in VARIANTS for n in variant_names("attention", default))
    assert variant_names("default", default) == [default]
    assert default + ATTENTION in variant_names("all", default)  # every variant: FP8 attention side by side
    assert variant_names("fp8,fp8+fast_accum", default) == ["fp8", "fp8+fast_accum"]


def test_a_variant_sets_the_gemms_the_mlps_and_the_prefill_kernel():
    eng, gemm, mlp = SimpleNamespace(prefill_kernel="triton"), SimpleNamespace(), SimpleNamespace()
    name = "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass"
    _apply(eng, [gemm], [mlp], VARIANTS[name + ATTENTION], "triton")
    assert eng.prefill_kernel == "triton_fp8" and mlp.kernel == "one_pass" and gemm.fast_accum
    assert not hasattr(gemm, "fp8_attention")  # not a GEMM attribute
    _apply(eng, [gemm], [mlp], VARIANTS[name], "triton")
    assert eng.prefill_kernel == "triton"  # back to the bf16 attention kernel
    with pytest.raises(RuntimeError, match="Triton prefill kernel"):
        _apply(eng, [gemm], [mlp], VARIANTS[name + ATTENTION], "fa2")


def test_the_kernels_spec_runs_the_default_then_each_quantization_kernel():
    default = "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel"
    names = variant_names("kernels", default)
    assert names[0] == default and set(names[1:]) == set(KERNELS) - {default} and all(n in VARIANTS for n in names)
    assert len(names) == len(set(names))
    assert {VARIANTS[n]["mlp_kernel"] for n in names} == {"one_pass", "chunked"}
    assert {VARIANTS[n].get("quant_kernel") for n in names} == {None, "sites", "all"}
    assert set(variant_names("all", default)) & set(names) == {default, "fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass"}
    assert default + ATTENTION in VARIANTS  # the fp8-attention stage runs the default with FP8 attention
    assert "fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked" not in variant_names("all", default)


def test_a_quant_kernel_variant_sets_the_kernel_at_its_sites_and_the_next_variant_takes_it_back():
    eng = SimpleNamespace(prefill_kernel="triton")
    sites = ("merged_q_k_v", "o_proj", "merged_gate_up", "down_proj")
    gemms, mlp = [SimpleNamespace(site=s) for s in sites], SimpleNamespace()
    _apply(eng, gemms, [mlp], VARIANTS["fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel"], "triton")
    assert [g.quant for g in gemms] == ["kernel", "kernel", "fp32", "fp32"] and mlp.kernel == "chunked"
    assert not any(hasattr(g, "quant_kernel") for g in gemms)  # not a GEMM attribute
    _apply(eng, gemms, [mlp], VARIANTS["fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass+quant_kernel_all"], "triton")
    assert {g.quant for g in gemms} == {"kernel"}
    _apply(eng, gemms, [mlp], VARIANTS["fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass"], "triton")
    assert {g.quant for g in gemms} == {"fp32"} and mlp.kernel == "one_pass"


def test_the_kernels_alone_report_each_kernels_time_bytes_and_bits(monkeypatch):
    from bench import fp8_quant

    monkeypatch.setattr(fp8_quant, "time_ms", lambda fn: fn() and 0.5)  # CUDA events: the H200's
    monkeypatch.setattr(fp8_quant.torch, "compile", lambda fn, **kw: fn)  # inductor: the H200's
    got = fp8_quant.quant_kernels_alone(6, 40, 24, device="cpu")  # off CUDA the ops are the torch math
    for name in ("quant_rows_torch_eager", "quant_rows_inductor", "quant_rows_kernel", "silu_mul_quant_one_pass",
                 "silu_mul_quant_two_pass", "silu_mul_quant_chunked"):
        assert got[name]["us"] == 500 and got[name]["codes_differ"] == 0 and got[name]["scales_equal"], name
    assert got["quant_rows_kernel"]["gb_per_s"] == (6 * 40 * 3 + 6 * 4) / 0.5e-3 / 1e9


def test_the_code_defaults_are_the_chunked_kernel_with_the_row_kernel_at_its_sites(tmp_path):
    """The bench names the engine's default FP8 variant from its modules (the JSON's default_variant)."""
    from bench.fp8_prefill import current_variant
    from worker.config.settings import ModelRun
    from worker.engine.fp8 import fp8_gemms, fp8_mlps
    from worker.engine.loader import load_engine
    from worker.engine.tiny import make_tiny_checkpoint

    path = make_tiny_checkpoint(tmp_path / "m", arch="qwen2", seed=1)
    eng = load_engine(ModelRun(path=str(path), max_new_tokens=4, quantization="fp8"), fp8_min_rows=64, merge="on")
    gemms, mlps = fp8_gemms(eng.base), fp8_mlps(eng.base)
    assert current_variant(gemms, mlps) == VARIANTS["fp8+fast_accum+bias_in_gemm+mlp_kernel_chunked+quant_kernel"]
    for g in gemms:
        g.quant = "kernel"
    assert current_variant(gemms, mlps)["quant_kernel"] == "all"
    for g in gemms:
        g.quant = "fp32"
    for m in mlps:
        m.kernel = "one_pass"
    assert current_variant(gemms, mlps) == VARIANTS["fp8+fast_accum+bias_in_gemm+mlp_kernel_one_pass"]
