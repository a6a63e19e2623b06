"""The decode step's launch choices on CPU: the decode kernel storing the step's K/V itself
(`write_new`) against index_copy_ then the kernel, and the BLAS library the step runs under.

The Triton kernel runs on the CPU through Triton's interpreter (TRITON_INTERPRET=1, read when the
kernel module is imported), so those checks run in a fresh interpreter (`python this_file ...`).
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from worker.engine.decode import (
    StepConfig,
    StepRunner,
    blas_library,
    want_decode_blas,
    want_kv_layout,
    want_kv_write,
)
from worker.engine.errors import EngineSettingError
from worker.engine.tiny import make_tiny_checkpoint


def _interpreted(*args: str) -> dict:
    from tests.engine import interpreted   # here: the child runs this file as a script, without tests/ on its path

    return interpreted.run(__file__, *args, timeout=600)


def test_kernel_stores_the_new_rows_as_index_copy_does():
    got = _interpreted("kernel")
    for case in got["cases"]:
        assert case["out_equal"] and case["cache_equal"], case
        assert case["padding_own_rows"], case  # rows sharing the scratch row each attend their own new K/V
    assert {c["splits"] for c in got["cases"]} == {1, 2, 4}


def test_decode_step_with_the_kernel_write_equals_separate_writes(tmp_path):
    path = make_tiny_checkpoint(tmp_path / "q", "qwen2", seed=2)
    got = _interpreted("engine", str(path))
    assert got["fused"]["decode_index_copies"] == 0  # the kernel stored every decode row
    assert got["separate"]["decode_index_copies"] > 0
    assert got["fused"]["tokens"] == got["separate"]["tokens"]
    assert got["fused"]["kv_sha"] == got["separate"]["kv_sha"]  # the same rows, the same bits, in the pool
    assert got["fused"]["tokens"] == got["reference"]["tokens"]  # and the exact backend's greedy ids
    for name in ("fused", "separate", "reference"):  # head-major storage: the same values, bit for bit
        head = got[f"{name}_head"]
        assert head["tokens"] == got[name]["tokens"] and head["kv_sha"] == got[name]["kv_sha"], name
    assert got["fused_head"]["kv_strides"][1] > got["fused_head"]["kv_strides"][0]  # stored head-major


def test_settings_resolve_and_refuse_unknown_values():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert want_decode_blas("auto", cuda) == "cublaslt" and want_decode_blas("auto", cpu) is None
    assert want_decode_blas("default", cuda) is None and want_decode_blas("cublas", cuda) == "cublas"
    assert want_decode_blas("cublaslt", cuda) == "cublaslt" and want_decode_blas("cublaslt", cpu) is None
    assert want_kv_write("fused", "varlen") and want_kv_write("fused", "flash_attn")
    assert not want_kv_write("auto", "varlen") and not want_kv_write("separate", "varlen")
    assert not want_kv_write("fused", "reference")
    assert want_kv_layout("auto", cuda, "varlen") == "token" and want_kv_layout("auto", cpu, "reference") == "token"
    assert want_kv_layout("auto", cuda, "reference") == "token" and want_kv_layout("head", cpu, "reference") == "head"
    with pytest.raises(EngineSettingError) as err:
        want_kv_layout("hnd", cuda, "varlen")
    assert err.value.setting == "kv_layout"
    with pytest.raises(EngineSettingError) as err:
        want_decode_blas("lt", cuda)
    assert err.value.setting == "decode_blas"
    with pytest.raises(EngineSettingError) as err:
        want_kv_write("both", "varlen")
    assert err.value.setting == "decode_kv_write"


def test_blas_library_is_restored_after_the_step():
    before = torch.backends.cuda.preferred_blas_library()
    other = "cublaslt" if before == torch._C._BlasBackend.Cublas else "cublas"
    with pytest.raises(RuntimeError), blas_library(other):
        assert torch.backends.cuda.preferred_blas_library() != before
        raise RuntimeError("a failed capture")
    assert torch.backends.cuda.preferred_blas_library() == before
    with blas_library(None):
        assert torch.backends.cuda.preferred_blas_library() == before


def test_eager_step_runs_under_the_chosen_blas(monkeypatch):
    import worker.engine.decode as decode

    seen = []
    monkeypatch.setattr(decode, "decode_step", lambda *a: seen.append(str(torch.backends.cuda.preferred_blas_library())))
    before = torch.backends.cuda.preferred_blas_library()
    runner = StepRunner(None, None, None, use_graphs=False, marker=None)
    eos = torch.tensor([1])
    runner.run(None, None, StepConfig(4, 0.0, 1.0, eos, 1, blas="cublaslt"))
    runner.run(None, None, StepConfig(4, 0.0, 1.0, eos, 1))
    assert seen[0].endswith("Cublaslt") and seen[1] == str(before)
    assert torch.backends.cuda.preferred_blas_library() == before


def test_runner_keeps_one_state_per_launch_choice(tmp_path):
    from worker.engine.kvcache import KVPool

    pool = KVPool(2, 2, 16, torch.float32, torch.device("cpu"), max_new=4)
    pool.ensure(64, 4)
    runner = StepRunner(None, None, pool, use_graphs=False, marker=torch.ones(1))
    eos = torch.tensor([1])
    a = runner.state(4, StepConfig(4, 0.0, 1.0, eos, 1))
    b = runner.state(4, StepConfig(4, 0.0, 1.0, eos, 1, write_new=True))
    c = runner.state(4, StepConfig(4, 0.0, 1.0, eos, 1, blas="cublaslt"))
    assert a[0] is not b[0] and a[0] is not c[0] and b[0] is not c[0]
    assert runner.state(4, StepConfig(4, 0.0, 1.0, eos, 1, write_new=True))[0] is b[0]


def test_a_captured_graph_keeps_the_tensors_it_reads(monkeypatch):
    """A CUDA graph reads its config's tensors (cfg.eos) by address at every replay, and a later config with
    equal values finds the same graph: the runner must keep the captured config's tensors alive, or a replay
    reads freed memory (on the H200 a warmed-up engine decoded past EOS: test_gpu_engine's warm-up test)."""
    import gc
    import weakref

    from worker.engine.kvcache import KVPool

    pool = KVPool(2, 2, 16, torch.float32, torch.device("cpu"), max_new=4)
    pool.ensure(64, 4)
    runner = StepRunner(None, None, pool, use_graphs=True, marker=torch.ones(1))
    monkeypatch.setattr(runner, "_capture", lambda st, cfg: object())  # a graph stand-in (no CUDA here)
    eos = torch.tensor([2])
    seen = weakref.ref(eos)
    st, graph = runner.state(4, StepConfig(4, 0.0, 1.0, eos, 1))
    del eos
    gc.collect()
    assert seen() is not None  # the captured config's eos lives as long as its graph
    again = runner.state(4, StepConfig(4, 0.0, 1.0, torch.tensor([2]), 1))  # equal values: the same graph
    assert again == (st, graph)
    runner.clear()
    gc.collect()
    assert seen() is None  # and goes with it


# ---------------------------------------------------------------- run under TRITON_INTERPRET=1
def _kernel_cases() -> dict:
    from worker.engine.decode_kernel import decode_attention

    gen = torch.Generator().manual_seed(0)
    heads, kv_heads, dim = 8, 2, 16
    lens = [1, 2, 63, 64, 65, 200, 1, 1]  # the last two: padding rows on one shared scratch row
    starts = [0, 5, 20, 100, 180, 260, 470, 470]
    rows = 471
    cases = []
    for splits in (1, 2, 4):
        k = torch.randn(rows, kv_heads, dim, generator=gen)  # [S, Hkv, D]
        v = torch.randn(rows, kv_heads, dim, generator=gen)  # [S, Hkv, D]
        q = torch.randn(len(lens), heads, dim, generator=gen)  # [B, H, D]
        kn = torch.randn(len(lens), kv_heads, dim, generator=gen)  # [B, Hkv, D]
        vn = torch.randn(len(lens), kv_heads, dim, generator=gen)  # [B, Hkv, D]
        st = torch.tensor(starts, dtype=torch.int32)
        ln = torch.tensor(lens, dtype=torch.int32)
        new = (st + ln - 1).long()  # [B]
        k1, v1, k2, v2 = k.clone(), v.clone(), k.clone(), v.clone()
        k1.index_copy_(0, new[:-2], kn[:-2])
        v1.index_copy_(0, new[:-2], vn[:-2])
        want = decode_attention(q[:-2], k1, v1, st[:-2], ln[:-2], 0.25, splits)  # [B-2, H, D]
        got = decode_attention(q, k2, v2, st, ln, 0.25, splits, new_kv=(kn, vn))  # [B, H, D]
        own = []
        for r in (len(lens) - 2, len(lens) - 1):  # one key: softmax weight 1, the output is the row's own v
            own.append(torch.equal(got[r], vn[r].repeat_interleave(heads // kv_heads, dim=0)))
        cases.append({"splits": splits, "out_equal": torch.equal(got[:-2], want),
                      "cache_equal": torch.equal(k1[:470], k2[:470]) and torch.equal(v1[:470], v2[:470]),
                      "padding_own_rows": all(own)})
    return {"cases": cases}


def _engine_runs(path: str) -> dict:
    import hashlib

    from transformers import AttentionInterface

    from engine_helpers import _docs, _engine, _stage
    from worker.engine import attention as attn

    def prefill(q, k, v, ctx, scale):  # the exact prefill: varlen_attn needs CUDA
        return attn.reference_prefill(q, k, v, ctx.cu_host, scale)

    copies = {"n": 0}
    write_kv = attn._write_kv

    def counted(ctx, layer, k, v):
        copies["n"] += ctx.mode == "decode"
        write_kv(ctx, layer, k, v)

    attn._write_kv = counted
    out = {}
    for name in ("reference", "fused", "separate", "reference_head", "fused_head", "separate_head"):
        eng = _engine(path, max_new_tokens=7, kv_layout="head" if name.endswith("_head") else "auto")
        if not name.startswith("reference"):  # the fused backends' decode path (Triton kernel) with an exact prefill
            AttentionInterface.register("ribbon_varlen", attn._make(prefill, attn.kernel_decode))
            eng.model.config._attn_implementation = "ribbon_varlen"
            eng.write_new = name.startswith("fused")
        eng.pool.ensure(4_096, 16)  # sized before the bin (no reallocation in it) and zeroed: rows compare
        for t in (*eng.pool.k, *eng.pool.v):
            t.zero_()
        copies["n"] = 0
        docs = _docs(5, 3, 90, eng.model.config.vocab_size, seed=4)
        gens = eng.generate(_stage(eng, docs))
        sha = hashlib.sha256()
        for t in (*eng.pool.k, *eng.pool.v):
            sha.update(t[: eng.pool.rows].contiguous().numpy().tobytes())  # the scratch row left out
        out[name] = {"tokens": [g.token_ids for g in gens], "decode_index_copies": copies["n"],
                     "kv_sha": sha.hexdigest(), "kv_strides": list(eng.pool.k[0].stride())}
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: engine_helpers
    print(json.dumps(_kernel_cases() if sys.argv[1] == "kernel" else _engine_runs(sys.argv[2])))
