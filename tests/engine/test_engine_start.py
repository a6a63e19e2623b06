"""Engine start-up: the backend choice checks the torch API it picks, the worker refuses a slow CUDA
start (one line, exit 2), compiled layers are chosen by setting, and warm-up sets up at start what
the first live bin would otherwise build (KV pool, decode states / CUDA graphs)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine_helpers import _stage_unpadded as _stage

from worker.engine import attention
from worker.engine.errors import EngineSettingError
from worker.engine.fuse import want_compile
from worker.engine.loader import load_engine, refuse_slow_cuda
from worker.engine.tiny import make_tiny_checkpoint
from worker.config.settings import ModelRun

CUDA = torch.device("cuda")  # a device object only: choose_backend never touches the GPU
ROOT = Path(__file__).resolve().parents[2]


def _hide_varlen(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.nn.attention.varlen", None)  # importing it raises ImportError


def test_auto_picks_varlen_only_when_torch_has_it(monkeypatch):
    monkeypatch.setattr(attention, "triton_available", lambda: True)
    monkeypatch.setattr(attention, "flash_attn_available", lambda: False)
    assert attention.varlen_available()  # torch 2.13 here
    assert attention.choose_backend("auto", CUDA) == "varlen"
    _hide_varlen(monkeypatch)
    assert not attention.varlen_available()
    assert attention.choose_backend("auto", CUDA) == "reference"  # before: "varlen", then the first bin raised
    with pytest.raises(EngineSettingError, match="varlen needs torch.nn.attention.varlen") as err:
        attention.choose_backend("varlen", CUDA)
    assert err.value.setting == "engine.attention"


def test_prefill_kernel_triton_only_where_it_applies(monkeypatch):
    monkeypatch.setattr(attention, "triton_available", lambda: True)
    bf16 = torch.bfloat16
    assert attention.want_prefill_kernel("auto", CUDA, "varlen", 128, bf16) == "triton"
    assert attention.want_prefill_kernel("auto", CUDA, "varlen", 80, bf16) == "fa2"  # not a power of two
    assert attention.want_prefill_kernel("auto", CUDA, "reference", 128, bf16) == "fa2"  # the reference's own
    assert attention.want_prefill_kernel("auto", torch.device("cpu"), "reference", 128, torch.float32) == "fa2"
    assert attention.want_prefill_kernel("fa2", CUDA, "varlen", 128, bf16) == "fa2"  # asked for
    with pytest.raises(EngineSettingError, match="triton needs CUDA") as err:
        attention.want_prefill_kernel("triton", torch.device("cpu"), "reference", 128, torch.float32)
    assert err.value.setting == "prefill_kernel"
    with pytest.raises(EngineSettingError, match="is not one of"):
        attention.want_prefill_kernel("fa3", CUDA, "varlen", 128, bf16)
    monkeypatch.setattr(attention, "triton_available", lambda: False)
    assert attention.want_prefill_kernel("auto", CUDA, "varlen", 128, bf16) == "fa2"


def test_flash_attn_requested_without_it_names_the_setting(monkeypatch):
    monkeypatch.setattr(attention, "flash_attn_available", lambda: False)
    with pytest.raises(EngineSettingError) as err:
        attention.choose_backend("flash_attn", CUDA)
    assert err.value.setting == "engine.attention" and "flash_attn" in err.value.message


def test_reference_on_cuda_refused_unless_asked_for():
    with pytest.raises(EngineSettingError) as err:
        refuse_slow_cuda("reference", CUDA, "auto")
    assert err.value.setting == "engine.attention" and "reference" in err.value.allowed
    refuse_slow_cuda("reference", CUDA, "reference")  # asked for explicitly
    refuse_slow_cuda("reference", torch.device("cpu"), "auto")  # the CPU path is the reference
    refuse_slow_cuda("varlen", CUDA, "auto")


def test_compile_setting():
    assert not want_compile("auto", torch.device("cpu"), "reference")
    assert want_compile("auto", CUDA, "varlen") and want_compile("on", CUDA, "flash_attn")
    assert not want_compile("off", CUDA, "varlen") and not want_compile("auto", CUDA, "reference")
    with pytest.raises(EngineSettingError) as err:
        want_compile("on", torch.device("cpu"), "reference")
    assert err.value.setting == "engine.compile"


def test_worker_with_an_impossible_backend_exits_2_with_one_line(tiny, tmp_path):
    env = {**os.environ, "RIBBON_ENGINE__ATTENTION": "varlen", "RIBBON_ENGINE__DEVICE": "cpu",
           "RIBBON_MODEL__PATH": str(tiny),
           "RIBBON_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:9", "RIBBON_CACHE_DIR": str(tmp_path),
           "RIBBON_SERVER__PORT": "0", "RIBBON_LOG_LEVEL": "ERROR"}
    run = subprocess.run([sys.executable, "-m", "worker", "run"], capture_output=True, text=True, env=env,
                         timeout=240, cwd=ROOT)
    assert run.returncode == 2, run.stderr[-1500:]
    assert "Traceback" not in run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("ribbon: error: setting engine.attention (RIBBON_ENGINE__ATTENTION)"), line


def test_autotune_with_an_impossible_backend_exits_2_with_one_line(tiny, tmp_path):
    """`ribbon autotune` loads the engine too: varlen on a CPU is one line naming the setting, exit 2."""
    env = {**os.environ, "RIBBON_ENGINE__ATTENTION": "varlen", "RIBBON_ENGINE__DEVICE": "cpu",
           "RIBBON_CACHE_DIR": str(tmp_path), "RIBBON_LOG_LEVEL": "ERROR"}
    run = subprocess.run([sys.executable, "-m", "worker", "autotune", "--model", str(tiny)], capture_output=True,
                         text=True, env=env, timeout=240, cwd=ROOT)
    assert run.returncode == 2, run.stderr[-1500:]
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ribbon: error: setting engine.attention (RIBBON_ENGINE__ATTENTION)"), lines[0]
    assert "needs a CUDA device" in lines[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("start"), "qwen2", seed=5)


def test_warm_up_builds_pool_and_decode_states_before_the_first_bin(tiny):
    eng = load_engine(ModelRun(path=str(tiny), max_new_tokens=6))
    rng = random.Random(1)
    docs = [[rng.randrange(4, 200) for _ in range(rng.randint(1, 60))] for _ in range(10)]
    cold = eng.generate(_stage(eng, docs))
    eng.free()
    report = eng.warm_up(budget=2_048, max_docs=10)
    assert report["buckets"] == 7 and eng.pool.rows >= 2_048 and eng.pool.docs >= 10  # 1,2,3,4,6,8,12
    sizes = {key[0] for key in eng.runner._states}
    assert {1, 2, 3, 4, 6, 8, 12} <= sizes
    generation, states = eng.pool.generation, set(eng.runner._states)
    warm = eng.generate(_stage(eng, docs))  # weight 10 * (<= 60 + 6) <= 2,048: fits the warmed pool
    assert eng.pool.generation == generation and set(eng.runner._states) == states  # nothing built in the bin
    assert warm == cold


def test_compiled_layers_give_eager_logits_in_bf16(tiny):
    """fuse.compile_layers on the CPU (inductor's C++ backend; the GPU run uses Triton, same graphs),
    with merged projections as on CUDA (the merged GEMMs' hand-over traced into the graph): with
    eager's precision casts emulated, bf16 logits are bit-equal to the plain eager layers'."""
    from transformers import AutoModelForCausalLM

    from worker.engine.fuse import compile_layers, uncompile_layers
    from worker.engine.loader import engine_for_model
    from worker.engine.merge import merge_projections, unmerge_projections

    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    eng = engine_for_model(model, None, max_new_tokens=4)
    rng = random.Random(2)
    docs = [[rng.randrange(4, 200) for _ in range(rng.randint(1, 90))] for _ in range(6)]
    eager = eng.prefill_last_logits(_stage(eng, docs))  # [n, V]
    merge_projections(eng.base)
    compile_layers(eng.base)
    try:
        fused = eng.prefill_last_logits(_stage(eng, docs))
    finally:
        uncompile_layers(eng.base)
        unmerge_projections(eng.base)
    assert torch.equal(fused, eager)
