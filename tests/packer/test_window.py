"""The adaptive window through Python with a virtual clock, and the simulator."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import _core
from bench.packer_sim import AdaptivePolicy, FixedPolicy, ServiceModel, simulate


def policy(**kw) -> _core.WindowPolicy:
    args = {"budget": 16384, "efficient_tokens": 8192, "max_seqs": 256, "max_wait_s": 0.05, "latency_target_s": 2.0}
    args.update(kw)
    return _core.WindowPolicy(**args)


def test_bad_settings_name_the_value():
    with pytest.raises(ValueError, match="max_wait_s must be >= 0, got -1"):
        policy(max_wait_s=-1.0)
    with pytest.raises(ValueError, match="latency_target_s"):
        policy(latency_target_s=0.0)


def test_released_at_once_when_efficient_and_waits_for_arrivals_when_empty():
    p = policy()
    assert p.decide(1.0, 8192, 3, 0.9) == ("efficient", 0.0)
    action, wait = p.decide(1.0, 0, 0, 0.0)
    assert action == "wait" and math.isinf(wait)


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 0.05), min_size=1, max_size=60),
    sizes=st.lists(st.integers(1, 4000), min_size=60, max_size=60),
    passes=st.lists(st.tuples(st.integers(1, 16384), st.floats(0.001, 3.0)), max_size=6),
    max_wait=st.floats(0.0, 0.5),
    target=st.floats(0.01, 3.0),
)
def test_the_oldest_never_waits_past_its_limit(gaps, sizes, passes, max_wait, target):
    """Whatever the arrivals and the learned pass times: a wait never reaches past
    the oldest sequence's limit, and at the limit the bin goes (age bound of the window)."""
    p = policy(max_wait_s=max_wait, latency_target_s=target)
    now = 0.0
    for w, t in passes:  # teach it some pass times
        p.on_release(now, w)
        now += t
        p.on_ready(now)
    oldest, weight, seqs = now, 0, 0
    for gap, size in zip(gaps, sizes):
        now += gap
        p.on_arrival(now, size)
        weight, seqs = weight + size, seqs + 1
        limit = p.wait_limit_s()
        assert 0.0 <= limit <= max_wait
        action, wait = p.decide(now, weight, seqs, oldest)
        if action == "wait":
            assert now + wait <= oldest + limit + 1e-9
        if now - oldest >= limit:
            assert action != "wait"


def test_sim_completes_every_sequence_once_and_fixed_policy_respects_its_wait():
    rng = np.random.default_rng(0)
    times = np.cumsum(rng.exponential(0.01, 2000))  # float64 [n]
    lengths = rng.integers(65, 2531, len(times))
    model = ServiceModel("m", 0.005, 300_000.0)
    fixed = simulate(times, lengths, FixedPolicy("f", 16384, 0.2, 256), model, 16384, 0)
    imm = simulate(times, lengths, FixedPolicy("i", 16384, 0.0, 256), model, 16384, 0)
    assert fixed["sequences"] == imm["sequences"] == 2000
    # At ~130k tokens/s a 200 ms window holds far more than one 5 ms pass does.
    assert fixed["mean_fill"] > 2 * imm["mean_fill"]
    assert fixed["p50_latency_s"] > imm["p50_latency_s"]
    assert imm["max_latency_s"] < fixed["max_latency_s"]


def test_sim_adaptive_learns_the_service_model_it_is_driven_by():
    rng = np.random.default_rng(1)
    times = np.cumsum(rng.exponential(0.006, 3000))
    lengths = rng.integers(65, 2531, len(times))
    pol = AdaptivePolicy(16384, 8192, 256, 0.05, 2.0)
    simulate(times, lengths, pol, ServiceModel("m", 0.005, 300_000.0), 16384, 0)
    assert pol._p.has_service_model()
    assert pol._p.service_overhead_s() == pytest.approx(0.005, rel=1e-6)
    assert pol._p.service_s_per_weight() == pytest.approx(1 / 300_000.0, rel=1e-6)


def test_sim_adaptive_waits_at_high_load_and_not_at_low_load():
    """At 90% of a fast GPU the window fills bins beyond greedy dispatch; at 10% it
    does not wait at all (same bins as immediate dispatch)."""
    model = ServiceModel("m", 0.005, 300_000.0)
    cap = model.capacity(16384)
    out = {}
    for load in (0.1, 0.9):
        rng = np.random.default_rng(2)
        mean_len = (65 + 2530) / 2
        times = np.cumsum(rng.exponential(mean_len / (load * cap), 6000))
        lengths = rng.integers(65, 2531, len(times))
        ad = simulate(times, lengths, AdaptivePolicy(16384, 8192, 256, 0.05, 2.0), model, 16384, 0)
        im = simulate(times, lengths, FixedPolicy("i", 16384, 0.0, 256), model, 16384, 0)
        out[load] = (ad, im)
    ad, im = out[0.1]
    assert ad["bins"] == im["bins"] and ad["p99_latency_s"] == pytest.approx(im["p99_latency_s"])
    ad, im = out[0.9]
    assert ad["mean_fill"] > im["mean_fill"] and ad["bins"] < im["bins"]
