"""Packing order: `arrival` (the default) lets every partition's committed prefix advance with each bin."""

from __future__ import annotations

import numpy as np
import pytest

from worker import _core
from worker.packer import Packer
from worker.config.settings import BatchingSettings


def test_arrival_takes_a_prefix_then_fills_with_the_largest():
    s = _core.PendingSet(100, 0, order="arrival")
    for sid, n in enumerate((30, 30, 50, 10, 20)):
        s.add(sid, 0, n, float(sid))
    assert s.select_bin(16).tolist() == [0, 1, 4, 3]  # 30 + 30, 50 does not fit: then 20, 10
    d = _core.PendingSet(100, 0)  # decreasing: the oldest, then the largest that fit
    for sid, n in enumerate((30, 30, 50, 10, 20)):
        d.add(sid, 0, n, float(sid))
    assert d.select_bin(16).tolist() == [0, 2, 4]


def test_an_unknown_order_is_refused_with_its_name():
    with pytest.raises(ValueError, match="'bogus'"):
        _core.PendingSet(100, 0, order="bogus")


def _published_by_bin(order: str, lengths: np.ndarray, keys: np.ndarray, budget: int, max_seqs: int) -> list[float]:
    """Share of documents whose partition prefix is complete (committable) after each bin of a backlog."""
    s = _core.PendingSet(budget, 0, order=order)
    for sid, (n, k) in enumerate(zip(lengths, keys)):
        s.add(sid, int(k), int(n), float(sid))
    done = np.zeros(len(lengths), dtype=bool)
    by_key = {int(k): np.flatnonzero(keys == k) for k in np.unique(keys)}  # offsets in arrival order
    out = []
    while len(s):
        done[s.select_bin(max_seqs)] = True
        published = sum(int(np.argmin(done[ids])) if not done[ids].all() else len(ids) for ids in by_key.values())
        out.append(published / len(lengths))
    return out


def test_arrival_order_publishes_in_step_with_the_bins_and_keeps_the_fill():
    rng = np.random.default_rng(7)
    lengths = rng.integers(200, 3000, size=3000)
    keys = rng.integers(0, 8, size=3000)
    arrival = _published_by_bin("arrival", lengths, keys, budget=300_000, max_seqs=256)
    decreasing = _published_by_bin("decreasing", lengths, keys, budget=300_000, max_seqs=256)
    half = len(arrival) // 2
    assert arrival[half - 1] >= 0.8 * half / len(arrival)  # in step with the bins
    assert decreasing[len(decreasing) // 2 - 1] < 0.1      # the old order: the backlog's end publishes it all
    assert len(arrival) <= len(decreasing) + 1             # (almost) no fill lost


def test_settings_choose_the_order_and_arrival_is_the_default():
    assert BatchingSettings().order == "arrival"
    with Packer.from_settings(BatchingSettings(order="arrival", max_wait_ms=0.0, efficient_tokens=1),
                              budget=100, reserve_per_seq=0) as p:
        for sid, n in enumerate((30, 30, 50, 10, 20)):
            p.submit(sid, [1] * n, key=0)
        got: list[int] = []
        while len(got) < 5:
            b = p.next_bin(5.0)
            got.extend(b.seq_ids.tolist())
            p.release(b.slot)
        assert got[:2] == [0, 1]


def test_one_frozen_config_holds_the_weight_rule_and_every_stat_is_typed():
    from dataclasses import FrozenInstanceError, fields

    from worker.packer import PackerConfig, PackerStats

    c = PackerConfig.from_settings(BatchingSettings(efficient_tokens=10**6), budget=1000, reserve_per_seq=64)
    assert c.weight(100) == 164 and c.fill(936, 1) == 1.0 and c.efficient_tokens == 1000  # capped at the budget
    with pytest.raises(FrozenInstanceError):
        c.budget = 5  # type: ignore[misc]
    with Packer.from_config(c) as p:
        assert p.config == c
        core = p._core.stats()
        assert set(core) == {f.name for f in fields(PackerStats)}  # no counter left untyped
        assert isinstance(p.stats(), PackerStats)
