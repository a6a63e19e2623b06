"""Property tests of bin selection (C++) against the pure-Python reference."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import _core
from worker.packer import Packer, PackerConfig
from bench.packer_ref import pack_reference, pack_stream_reference

SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def problems(draw):
    budget = draw(st.integers(8, 3000))
    reserve = draw(st.integers(0, budget // 4))
    lengths = draw(st.lists(st.integers(1, budget - reserve), min_size=0, max_size=300))
    max_seqs = draw(st.integers(1, 40))
    return lengths, budget, reserve, max_seqs


def bins_of(assignment: np.ndarray) -> list[list[int]]:
    out: dict[int, list[int]] = {}
    for i, b in enumerate(assignment.tolist()):
        out.setdefault(b, []).append(i)
    return [out[k] for k in sorted(out)]


@SETTINGS
@given(problems())
def test_cpp_selection_equals_the_python_reference(problem):
    lengths, budget, reserve, max_seqs = problem
    got = _core.pack_offline(np.array(lengths, dtype=np.uint32), budget, reserve, max_seqs)
    ref = pack_reference(lengths, budget, reserve, max_seqs)
    assert bins_of(got) == [sorted(b) for b in ref]


@SETTINGS
@given(problems(), st.integers(1, 4))
def test_cpp_streaming_equals_the_straightforward_python_ffd(problem, bins_ahead):
    lengths, budget, reserve, max_seqs = problem
    window = bins_ahead * budget
    got = _core.pack_offline(np.array(lengths, dtype=np.uint32), budget, reserve, max_seqs, window)
    ref = pack_stream_reference(lengths, budget, reserve, max_seqs, window)
    assert bins_of(got) == [sorted(b) for b in ref]


@SETTINGS
@given(problems(), st.sampled_from([0, 1, 3]))
def test_every_sequence_once_within_budget_and_max_seqs(problem, bins_ahead):
    lengths, budget, reserve, max_seqs = problem
    got = _core.pack_offline(np.array(lengths, dtype=np.uint32), budget, reserve, max_seqs, bins_ahead * budget)
    assert len(got) == len(lengths) and (got >= 0).all()
    w = np.array(lengths, dtype=np.int64) + reserve
    per_bin = np.bincount(got, weights=w) if len(got) else np.zeros(0)
    assert (per_bin <= budget).all()
    assert (np.bincount(got) <= max_seqs).all() if len(got) else True
    if len(got):  # bins are numbered 0..k-1 with none empty
        assert set(got.tolist()) == set(range(int(got.max()) + 1))


@SETTINGS
@given(
    budget=st.integers(16, 2000),
    ops=st.lists(st.tuples(st.booleans(), st.integers(1, 2000), st.integers(1, 8)), min_size=1, max_size=300),
)
def test_age_bound_no_sequence_waits_forever(budget, ops):
    """Every bin takes the oldest pending sequence first, so a sequence that finds k
    older sequences pending when it arrives is out within k + 1 bins, whatever the
    sizes that keep arriving."""
    s = _core.PendingSet(budget, 0)
    arrival_bins: dict[int, tuple[int, int]] = {}  # seq_id -> (bins formed so far, older pending)
    emitted_at: dict[int, int] = {}
    bins, next_id = 0, 0
    for is_add, length, max_seqs in ops:
        if is_add:
            arrival_bins[next_id] = (bins, len(s))
            s.add(next_id, 0, min(length, budget), float(next_id))
            next_id += 1
        elif len(s):
            for sid in s.select_bin(max_seqs).tolist():
                emitted_at[sid] = bins
            bins += 1
    while len(s):
        for sid in s.select_bin(1).tolist():
            emitted_at[sid] = bins
        bins += 1
    assert sorted(emitted_at) == list(range(next_id))
    for sid, (formed_before, older) in arrival_bins.items():
        assert emitted_at[sid] - formed_before <= older, sid


@settings(max_examples=25, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=60), min_size=1, max_size=80),
    alignment=st.sampled_from([1, 8, 16]),
)
def test_threaded_packer_reconstructs_the_inputs(seqs, alignment):
    with Packer(PackerConfig(budget=128, reserve_per_seq=4, max_seqs=16, efficient_tokens=1, max_wait_s=0.0,
                             alignment=alignment, slots=2, pad_token=-99, order="decreasing")) as p:
        for i, toks in enumerate(seqs):
            p.submit(i, toks, key=i % 3)
        out: dict[int, list[int]] = {}
        while len(out) < len(seqs):
            b = p.next_bin(10.0)
            assert b is not None
            cu = b.cu_seqlens.tolist()
            assert len(b.tokens) % alignment == 0 and len(b.tokens) - b.num_tokens < alignment
            assert b.weight <= 128 and cu[-1] == b.num_tokens
            assert b.max_seqlen == max(y - x for x, y in itertools.pairwise(cu))
            assert (b.tokens[b.num_tokens :] == -99).all()
            for j, sid in enumerate(b.seq_ids.tolist()):
                assert sid not in out
                out[sid] = b.tokens[cu[j] : cu[j + 1]].tolist()
            p.release(b.slot)
        assert out == dict(enumerate(seqs))
