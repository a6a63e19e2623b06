"""Sequence-length mixes of the issue, shared by the packer benchmarks."""

from __future__ import annotations

import numpy as np


def stress(rng: np.random.Generator, n: int) -> np.ndarray:
    """Alternating short (60-175) and long (2,420-2,660) documents."""
    out = np.empty(n, dtype=np.int64)  # int64 [n]
    out[0::2] = rng.integers(60, 176, (n + 1) // 2)
    out[1::2] = rng.integers(2420, 2661, n // 2)
    return out


def uniform(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(65, 2531, n)  # int64 [n]


def short_lines(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(8, 65, n)  # int64 [n]


MIXES = {"stress_60-175_2420-2660": stress, "uniform_65-2530": uniform, "short_lines_8-64": short_lines}
