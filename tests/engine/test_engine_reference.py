"""The exact CPU reference attention against a plain per-document loop.

`reference_prefill` and `reference_decode` batch documents (decode rows) of similar length into
one padded SDPA call per group. The grouping knobs (attention.PAD_SLACK, PREFILL_PAD_FREE,
DECODE_PAD_FREE) are read at call time, so each test runs under three settings: one group for
everything, the defaults, and no padding allowed at all (one group per distinct length). The
result must not depend on the grouping: fp32 against an fp64 per-document loop, max abs error
1e-5, on MHA and GQA shapes, with empty and 1-token documents.
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from worker.engine import attention
from worker.engine.attention import reference_decode, reference_prefill

TOL = 1e-5
SHAPES = {"mha": (4, 4, 16), "gqa": (8, 2, 32)}  # heads, kv heads, head dim
GROUPING = {
    "one_group": {"PAD_SLACK": 1e9, "PREFILL_PAD_FREE": 10**12, "DECODE_PAD_FREE": 10**12},
    "default": {},
    "many_groups": {"PAD_SLACK": 0.0, "PREFILL_PAD_FREE": 0, "DECODE_PAD_FREE": 0},
}
PREFILL_LENGTHS = [0, 1, 7, 1, 0, 33, 2, 120, 64, 65, 1, 9, 200, 0, 3, 31]
DECODE_LENGTHS = [1, 5, 0, 1, 77, 300, 2, 150, 12, 0, 13, 1, 256, 40]


@pytest.fixture(params=list(GROUPING))
def grouping(request, monkeypatch):
    for name, value in GROUPING[request.param].items():
        monkeypatch.setattr(attention, name, value)
    return request.param


def _naive(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    """One document, fp64. q: [Lq, H, D], k/v: [Lk, Hkv, D] -> [Lq, H, D]."""
    groups = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.repeat_interleave(groups, 1).double(), v.repeat_interleave(groups, 1).double()
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale  # [H, Lq, Lk]
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        future = torch.ones(lq, lk, dtype=torch.bool).triu(lk - lq + 1)  # [Lq, Lk]
        scores = scores.masked_fill(future, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)  # [Lq, H, D]


def _groups_formed(grouping: str, n_groups: int, n_distinct: int) -> None:
    """The setting under test really produced the grouping it names."""
    if grouping == "one_group":
        assert n_groups == 1
    if grouping == "many_groups":
        assert n_groups == n_distinct


@pytest.mark.parametrize("shape", list(SHAPES))
def test_prefill_equals_per_document_loop(grouping, shape):
    heads, kv_heads, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(0)
    cu = [0]
    for n in PREFILL_LENGTHS:
        cu.append(cu[-1] + n)
    total = cu[-1] + 5  # ribbon tail padding (alignment): its rows must come back zero
    q = torch.randn(total, heads, dim, generator=gen)  # [T, H, D]
    k = torch.randn(total, kv_heads, dim, generator=gen)  # [T, Hkv, D]
    v = torch.randn(total, kv_heads, dim, generator=gen)  # [T, Hkv, D]
    scale = dim**-0.5
    _groups_formed(grouping, len(attention._prefill_plan(cu, q.device)), len({n for n in PREFILL_LENGTHS if n}))

    out = reference_prefill(q, k, v, cu, scale)  # [T, H, D]

    want = torch.zeros(total, heads, dim, dtype=torch.float64)  # [T, H, D]
    for a, b in itertools.pairwise(cu):
        if b > a:
            want[a:b] = _naive(q[a:b], k[a:b], v[a:b], causal=True, scale=scale)
    assert out.dtype == torch.float32
    assert (out.double() - want).abs().max().item() < TOL


@pytest.mark.parametrize("shape", list(SHAPES))
def test_decode_equals_per_row_loop(grouping, shape):
    heads, kv_heads, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(1)
    rng = random.Random(1)
    starts, row = [], 0
    for n in DECODE_LENGTHS:  # slots in a shuffled order with gaps, like a KV pool after compaction
        starts.append(row)
        row += n + rng.randint(0, 9)
    order = list(range(len(starts)))
    rng.shuffle(order)
    starts = [starts[i] for i in order]
    lens = [DECODE_LENGTHS[i] for i in order]
    rows_total = row + 1
    k_cache = torch.randn(rows_total, kv_heads, dim, generator=gen)  # [S, Hkv, D]
    v_cache = torch.randn(rows_total, kv_heads, dim, generator=gen)  # [S, Hkv, D]
    q = torch.randn(len(lens), heads, dim, generator=gen)  # [B, H, D]
    kv_start = torch.tensor(starts, dtype=torch.int32)  # [B]
    kv_len = torch.tensor(lens, dtype=torch.int32)  # [B]
    scale = dim**-0.5
    _groups_formed(grouping, len(attention._decode_plan(kv_start, kv_len)), len({n for n in lens if n}))

    out = reference_decode(q, k_cache, v_cache, kv_start, kv_len, scale)  # [B, H, D]

    want = torch.zeros(len(lens), heads, dim, dtype=torch.float64)  # [B, H, D]
    for b, (s, n) in enumerate(zip(starts, lens)):
        if n:
            want[b] = _naive(q[b : b + 1], k_cache[s : s + n], v_cache[s : s + n], causal=False, scale=scale)[0]
    assert out.dtype == torch.float32
    assert (out.double() - want).abs().max().item() < TOL


@pytest.mark.parametrize("lens", [[1], [1, 1, 1], [0, 4, 4], [9, 0, 9, 9]])
def test_decode_single_group_with_empty_rows(grouping, lens):
    """Every non-empty row the same length: one group whatever the knobs; empty rows stay zero."""
    heads, kv_heads, dim = SHAPES["gqa"]
    gen = torch.Generator().manual_seed(2)
    starts = [10 * i for i in range(len(lens))]
    k_cache = torch.randn(10 * len(lens), kv_heads, dim, generator=gen)  # [S, Hkv, D]
    v_cache = torch.randn(10 * len(lens), kv_heads, dim, generator=gen)  # [S, Hkv, D]
    q = torch.randn(len(lens), heads, dim, generator=gen)  # [B, H, D]
    out = reference_decode(q, k_cache, v_cache, torch.tensor(starts, dtype=torch.int32),
                           torch.tensor(lens, dtype=torch.int32), dim**-0.5)  # [B, H, D]
    for b, (s, n) in enumerate(zip(starts, lens)):
        want = torch.zeros(heads, dim, dtype=torch.float64)
        if n:
            want = _naive(q[b : b + 1], k_cache[s : s + n], v_cache[s : s + n], causal=False, scale=dim**-0.5)[0]
        assert (out[b].double() - want).abs().max().item() < TOL, f"row {b} (kv_len {n})"


def test_engine_generation_with_one_group_per_length_matches_hf(monkeypatch, tmp_path):
    """Through the model (plans built once per forward, shared by layers): greedy tokens with
    no padding allowed equal per-document `model.generate`, and decode really ran several groups."""
    from transformers import AutoModelForCausalLM

    from worker.engine.loader import load_engine
    from worker.engine.tiny import make_tiny_checkpoint
    from worker.config.settings import ModelRun

    for name, value in GROUPING["many_groups"].items():
        monkeypatch.setattr(attention, name, value)
    groups: list[int] = []
    plan_of = attention._decode_plan

    def counted_plan(kv_start, kv_len):
        plan = plan_of(kv_start, kv_len)
        groups.append(len(plan))
        return plan

    monkeypatch.setattr(attention, "_decode_plan", counted_plan)
    path = make_tiny_checkpoint(tmp_path / "tiny", arch="qwen2", seed=1)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    eng = load_engine(ModelRun(path=str(path), max_new_tokens=8))
    rng = random.Random(4)
    docs = [[rng.randrange(4, hf.config.vocab_size) for _ in range(n)] for n in (1, 37, 5, 120, 1, 64, 9, 2)]
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + len(d))
    ribbon = torch.tensor([t for d in docs for t in d], dtype=torch.int32)  # [T]
    outs = eng.generate(eng.stage(ribbon, torch.tensor(cu, dtype=torch.int32), max(map(len, docs))))
    assert max(groups) > 1
    eos = list(eng.eos_ids)
    for i, (d, o) in enumerate(zip(docs, outs)):
        ids = hf.generate(torch.tensor([d]), max_new_tokens=8, do_sample=False, eos_token_id=eos, pad_token_id=0,
                          attention_mask=torch.ones(1, len(d), dtype=torch.long))[0, len(d):].tolist()
        assert o.token_ids == (ids[:-1] if ids and ids[-1] in eos else ids), f"doc {i} (len {len(d)})"
