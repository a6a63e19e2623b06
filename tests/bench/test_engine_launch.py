"""bench/engine_launch.py on the CPU: a job's decode launch choices are set on the engine and undone after."""

from __future__ import annotations

import torch

from bench.engine_launch import DECODE_LAUNCH, launch_choices
from engine_helpers import _engine
from worker.engine.decode_gemm import DecodeGemm
from worker.engine.tiny import make_tiny_checkpoint


def _gemms(eng) -> int:
    return sum(isinstance(m, DecodeGemm) for m in eng.base.modules())


def test_the_triton_gemms_are_installed_for_the_job_and_removed_after(tmp_path):
    eng = _engine(make_tiny_checkpoint(tmp_path / "q", "qwen2", seed=1), kv_layout="token")
    before = (eng.write_new, eng.decode_blas, eng.decode_gemm, eng.pool.layout)
    assert before[2] == "blas" and _gemms(eng) == 0
    for name, choices in DECODE_LAUNCH.items():
        with launch_choices(eng, **choices):
            triton = choices.get("gemm") == "triton"
            assert eng.decode_gemm == ("triton" if triton else "blas"), name
            assert (_gemms(eng) > 0) == triton, name
            assert eng.pool.layout == choices.get("layout", before[3]), name
        assert (eng.write_new, eng.decode_blas, eng.decode_gemm, eng.pool.layout) == before and _gemms(eng) == 0, name
    assert "ribbon_decode_gemm" in DECODE_LAUNCH and "ribbon_decode_gemm_separate" in DECODE_LAUNCH


def test_the_default_job_keeps_its_graphs():
    class Runner:
        cleared = 0

        def clear(self):
            self.cleared += 1

    class Eng:  # what launch_choices reads
        write_new, decode_blas, decode_gemm, runner = False, None, "blas", Runner()
        pool = type("Pool", (), {"layout": "token"})()

    eng = Eng()
    with launch_choices(eng):
        pass
    assert eng.runner.cleared == 0  # the profile replays the graphs the default job captured
    with launch_choices(eng, blas=str(torch.backends.cuda.preferred_blas_library()).split(".")[-1].lower()):
        pass
    assert eng.runner.cleared == 2
