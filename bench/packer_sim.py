"""Discrete-event simulation of the accumulation window on one GPU.

The real C++ pieces run under a virtual clock: ``_core.PendingSet`` forms the
bins and ``_core.WindowPolicy`` is the adaptive policy. The GPU serves one bin
at a time in ``t = a + tokens / tokens_per_s`` seconds; it asks for the next
bin (the policy's "ready") as soon as it is free. Used by bench/window_sim.py
and tests/packer/test_window.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from worker import _core

INF = math.inf


@dataclass(frozen=True)
class ServiceModel:
    name: str
    overhead_s: float  # a: fixed cost of a pass
    tokens_per_s: float  # 1 / b

    def time(self, tokens: int) -> float:
        return self.overhead_s + tokens / self.tokens_per_s

    def capacity(self, bin_tokens: int) -> float:
        """Tokens/s when every pass is a full bin of bin_tokens."""
        return bin_tokens / self.time(bin_tokens)


class Policy(Protocol):
    name: str
    max_seqs: int

    def on_arrival(self, now_s: float, weight: int) -> None: ...
    def on_ready(self, now_s: float) -> None: ...
    def on_release(self, now_s: float, weight: int) -> None: ...
    def decide(self, now_s: float, weight: int, seqs: int, oldest_s: float) -> tuple[str, float]: ...


@dataclass
class FixedPolicy:
    """Releases when the oldest has waited max_wait_s, or at max_seqs, or at a full bin."""

    name: str
    budget: int
    max_wait_s: float
    max_seqs: int

    def on_arrival(self, now_s: float, weight: int) -> None:
        pass

    def on_ready(self, now_s: float) -> None:
        pass

    def on_release(self, now_s: float, weight: int) -> None:
        pass

    def decide(self, now_s: float, weight: int, seqs: int, oldest_s: float) -> tuple[str, float]:
        if seqs == 0:
            return "wait", INF
        if weight >= self.budget or seqs >= self.max_seqs:
            return "full", 0.0
        left = oldest_s + self.max_wait_s - now_s
        return ("deadline", 0.0) if left <= 0 else ("wait", left)


class AdaptivePolicy:
    """The C++ WindowPolicy, unchanged."""

    def __init__(self, budget: int, efficient_tokens: int, max_seqs: int, max_wait_s: float, latency_target_s: float):
        self.name = "adaptive"
        self.max_seqs = max_seqs
        self._p = _core.WindowPolicy(
            budget=budget,
            efficient_tokens=efficient_tokens,
            max_seqs=max_seqs,
            max_wait_s=max_wait_s,
            latency_target_s=latency_target_s,
        )
        self.on_arrival = self._p.on_arrival
        self.on_ready = self._p.on_ready
        self.on_release = self._p.on_release

    def decide(self, now_s: float, weight: int, seqs: int, oldest_s: float) -> tuple[str, float]:
        return self._p.decide(now_s, weight, seqs, oldest_s)


def standard_policies(budget: int, max_seqs: int, efficient_tokens: int, max_wait_s: float, latency_target_s: float) -> list[Policy]:
    """The five policies of the issue: immediate, 16 seqs or 5 ms, 50 ms, 200 ms, adaptive."""
    return [
        FixedPolicy("immediate", budget, 0.0, max_seqs),
        FixedPolicy("16seq_or_5ms", budget, 0.005, 16),
        FixedPolicy("fixed_50ms", budget, 0.050, max_seqs),
        FixedPolicy("fixed_200ms", budget, 0.200, max_seqs),
        AdaptivePolicy(budget, efficient_tokens, max_seqs, max_wait_s, latency_target_s),
    ]


def simulate(
    times: np.ndarray, lengths: np.ndarray, policy: Policy, service: ServiceModel, budget: int, reserve_per_seq: int
) -> dict[str, float]:
    """Runs arrivals (times float64 [n], ascending; lengths int [n]) to completion."""
    n = len(times)
    finish = np.full(n, np.nan)  # float64 [n]
    pending = _core.PendingSet(budget, reserve_per_seq)
    i, now, bins, bin_tokens = 0, 0.0, 0, 0

    def arrive_until(t: float) -> None:
        nonlocal i
        while i < n and times[i] <= t:
            pending.add(i, 0, int(lengths[i]), float(times[i]))
            policy.on_arrival(float(times[i]), int(lengths[i]) + reserve_per_seq)
            i += 1

    while i < n or len(pending):
        arrive_until(now)
        policy.on_ready(now)
        while True:  # the GPU is free: release now or wait
            if not len(pending):
                if i == n:
                    break
                now = float(times[i])
                arrive_until(now)
                continue
            action, wait = policy.decide(now, pending.weight, len(pending), pending.oldest_arrival_s())
            if action != "wait":
                break
            wake = max(now + wait, math.nextafter(now, INF))  # always moves forward
            nxt = float(times[i]) if i < n else INF
            now = min(wake, nxt)
            arrive_until(now)
        if not len(pending):
            break
        ids = pending.select_bin(policy.max_seqs)  # int64 [k]
        tokens = int(lengths[ids].sum())
        policy.on_release(now, tokens + reserve_per_seq * len(ids))
        now += service.time(tokens)
        finish[ids] = now
        bins += 1
        bin_tokens += tokens
    return summarize(times, lengths, finish, bins, bin_tokens, budget)


def summarize(times: np.ndarray, lengths: np.ndarray, finish: np.ndarray, bins: int, bin_tokens: int, budget: int) -> dict[str, float]:
    horizon = float(times[-1])
    latency = finish - times  # float64 [n]
    done_in_horizon = finish <= horizon
    return {
        "sequences": len(times),
        "bins": bins,
        "throughput_tokens_per_s": float(lengths[done_in_horizon].sum() / horizon),
        "mean_fill": bin_tokens / (bins * budget) if bins else 0.0,
        "p50_latency_s": float(np.percentile(latency, 50)),
        "p99_latency_s": float(np.percentile(latency, 99)),
        "max_latency_s": float(latency.max()),
    }
