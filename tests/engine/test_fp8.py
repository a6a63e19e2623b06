"""FP8 prefill GEMMs (model.quantization = fp8), numerics checked on CPU through the emulated path
(the same quantized operands as torch._scaled_mm on the GPU; the speed is measured on the H200)."""

from __future__ import annotations

import pytest
import torch
from engine_helpers import _docs, _stage

from worker.engine.fp8 import Fp8Gemm, quantize_rows
from worker.engine.loader import load_engine
from worker.engine.tiny import make_tiny_checkpoint
from worker.config.settings import ModelSettings


def test_row_quantization_round_trips_within_e4m3_precision():
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)) * torch.logspace(-3, 3, 64)[:, None]
    q, scale = quantize_rows(x)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (64, 1)
    back = q.float() * scale
    assert ((back - x).abs() / x.abs().amax(dim=1, keepdim=True)).max() < 2**-4  # 3 mantissa bits, per-row scale


def test_fp8_gemm_is_close_to_the_full_precision_one_and_small_calls_keep_full_precision():
    g = torch.Generator().manual_seed(1)
    w, b = torch.randn(96, 128, generator=g), torch.randn(96, generator=g)
    gemm = Fp8Gemm(w, b, min_rows=32)
    big, small = torch.randn(2, 40, 128, generator=g), torch.randn(5, 128, generator=g)
    ref = torch.nn.functional.linear(big, w, b)
    rel = (gemm(big) - ref).norm() / ref.norm()
    assert 0 < rel < 0.05
    assert torch.equal(gemm(small), torch.nn.functional.linear(small, w, b))  # 5 rows < 32: the bf16 path


def test_an_fp8_engine_prefills_close_to_the_full_precision_engine(tmp_path):
    path = make_tiny_checkpoint(tmp_path / "m", arch="qwen2", seed=1)
    docs = _docs(12, 20, 60, 500, seed=3)
    full = load_engine(ModelSettings(path=str(path), max_new_tokens=4))
    fp8 = load_engine(ModelSettings(path=str(path), max_new_tokens=4, quantization="fp8"), fp8_min_rows=64)
    a = full.prefill_last_logits(_stage(full, docs))  # [n, V]
    b = fp8.prefill_last_logits(_stage(fp8, docs))
    diff = (a - b).abs().mean() / a.abs().mean()
    # e4m3 keeps 3 mantissa bits (bf16 7): this sharp random model turns that into ~24% of the mean |logit|
    # (bf16-rounded weights give ~2%); the H200 benchmark reports the figure for a 7B architecture
    assert 0 < diff < 0.4
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= 0.5
    off = load_engine(ModelSettings(path=str(path), max_new_tokens=4, quantization="fp8"), fp8_min_rows=10**6)
    assert torch.equal(off.prefill_last_logits(_stage(off, docs)), a)  # below min_rows: the full-precision path


def test_fp8_is_a_settings_error_on_a_gpu_without_fp8(monkeypatch):
    from worker.engine import fp8
    from worker.engine.errors import EngineSettingError

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "A100")
    with pytest.raises(EngineSettingError, match="model.quantization: fp8 needs compute capability"):
        fp8.check_fp8(torch.device("cuda"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs on the H200)")
def test_scaled_mm_matches_the_emulated_fp8_gemm_on_the_gpu():
    g = torch.Generator(device="cuda").manual_seed(2)
    w = torch.randn(512, 256, device="cuda", generator=g).to(torch.bfloat16)
    x = torch.randn(2048, 256, device="cuda", generator=g).to(torch.bfloat16)
    gemm = Fp8Gemm(w, None, min_rows=1024)
    got = gemm(x).float()  # torch._scaled_mm, row-wise scales
    a, s = quantize_rows(x)
    want = (a.float() @ gemm.w_fp8.float().t()) * s * gemm.w_scale
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)  # bf16 output rounding
    ref = x.float() @ w.float().t()
    assert ((got - ref).norm() / ref.norm()).item() < 0.05
