"""Merged projections (worker/engine/merge.py): q/k/v and gate/up as one GEMM each, the model code
still transformers'. On CPU in fp32 the merged engine must give Hugging Face's greedy tokens and
the unmerged engine's logits; the weights are held once; unmerge restores the original modules."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from engine_helpers import _stage_unpadded as _stage
from worker.engine.loader import load_engine
from worker.engine.merge import Merged, Part, merge_projections, unmerge_projections, want_merge
from worker.engine.tiny import make_tiny_checkpoint
from worker.config.settings import ModelRun


@pytest.fixture(scope="module", params=["qwen2", "llama"])  # q/k/v with bias (Qwen2) and without (Llama)
def ckpt(request, tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("merge_" + request.param), arch=request.param, seed=3)


def _engine(path, merge: str, max_new: int = 7):
    return load_engine(ModelRun(path=str(path), max_new_tokens=max_new), merge=merge)


def _docs(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, vocab) for _ in range(rng.randint(1, 60))] for _ in range(n)]


def test_merged_engine_matches_unmerged_logits_and_hf_greedy(ckpt):
    from transformers import AutoModelForCausalLM

    from worker.engine.autotune import cache_key

    plain, merged = _engine(ckpt, "off"), _engine(ckpt, "on")
    assert not plain.merged and merged.merged
    assert cache_key(plain, 7) != cache_key(merged, 7)  # a budget tuned unmerged is not reused merged
    layer = merged.base.layers[0]
    assert isinstance(layer.self_attn.q_proj, Part) and isinstance(layer.mlp.up_proj, Part)
    assert isinstance(layer.self_attn.merged_q_k_v, Merged) and isinstance(layer.mlp.merged_gate_up, Merged)
    docs = _docs(9, merged.model.config.vocab_size)
    want = plain.prefill_last_logits(_stage(plain, docs))  # [n, V]
    torch.testing.assert_close(merged.prefill_last_logits(_stage(merged, docs)), want, rtol=1e-5, atol=1e-5)
    hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    for d, o in zip(docs, merged.generate(_stage(merged, docs))):
        out = hf.generate(torch.tensor([d]), max_new_tokens=7, do_sample=False, eos_token_id=list(merged.eos_ids),
                          pad_token_id=0, attention_mask=torch.ones(1, len(d), dtype=torch.long))
        ids = out[0, len(d):].tolist()
        assert o.token_ids == (ids[:-1] if ids and ids[-1] in merged.eos_ids else ids)


def test_weights_held_once_and_unmerge_restores_the_modules(ckpt):
    eng = _engine(ckpt, "off")
    base = eng.base
    attn = base.layers[0].self_attn
    before = {n: p.detach().clone() for n, p in eng.model.named_parameters()}
    q_before = attn.q_proj
    assert merge_projections(base) == 2 * len(base.layers)
    params = list(eng.model.parameters())
    assert sum(p.numel() for p in params) == sum(t.numel() for t in before.values())  # no weight counted twice
    assert len({p.data_ptr() for p in params}) == len(params)
    group = attn.merged_q_k_v
    assert torch.equal(group.weight, torch.cat([before[f"model.layers.0.self_attn.{n}_proj.weight"] for n in "qkv"]))
    unmerge_projections(base)
    assert attn.q_proj is q_before and type(attn.q_proj) is nn.Linear and not hasattr(attn, "merged_q_k_v")
    assert attn.q_proj.weight.data_ptr() == group.weight.data_ptr()  # a view into the merged weight: no copy
    after = dict(eng.model.named_parameters())
    assert before.keys() == after.keys() and all(torch.equal(before[n], after[n]) for n in before)
    assert merge_projections(base) == 2 * len(base.layers) and attn.merged_q_k_v is group  # reused, not re-copied


def test_a_part_called_out_of_order_raises(ckpt):
    eng = _engine(ckpt, "on")
    attn = eng.base.layers[0].self_attn
    x = torch.randn(1, 3, eng.model.config.hidden_size)
    with pytest.raises(RuntimeError, match="part 1 called before part 0"):
        attn.k_proj(x)
    q = attn.q_proj(x)
    k, v = attn.k_proj(x), attn.v_proj(x)
    lin = attn.merged_q_k_v.originals
    for got, orig in zip((q, k, v), lin):
        torch.testing.assert_close(got, orig(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError):  # handed over once only
        attn.v_proj(x)


def test_merge_setting():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert want_merge("auto", cuda, "varlen") and not want_merge("auto", cpu, "reference")
    assert not want_merge("auto", cuda, "reference") and want_merge("on", cpu, "reference")
    assert not want_merge("off", cuda, "varlen")
    with pytest.raises(ValueError, match="merge='yes'"):
        want_merge("yes", cpu, "reference")
