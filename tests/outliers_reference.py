"""The numpy reference of the C++ templater's robust z (ext/core/templater_values.cpp: Templates.num_z, line_z).

tests/digest/test_digest_templates.py holds the C++ scores to it: a value's robust z within its
template variable, |x - median| / (1.4826 MAD), with 1.2533 * mean absolute deviation as the scale
when MAD is 0, and 0 for variables of fewer than MIN_GROUP values (the templater's min_group).
"""

from __future__ import annotations

import numpy as np

MIN_GROUP = 5  # values of one variable needed before they are compared: the templater's min_group default


def _cell_sorted(x: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """[T] x sorted by (cell, value)."""
    return x[np.lexsort((x, cell))]


def robust_z(cell: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """[T] float64 robust z of each value within its cell; cells with fewer than MIN_GROUP values get 0.

    cell [T] int (any ids), vals [T] float64.
    """
    z = np.zeros(len(vals))
    if len(vals) < MIN_GROUP:
        return z
    ids, dense, cnt = np.unique(cell, return_inverse=True, return_counts=True)  # [C], [T], [C]
    dense = dense.reshape(-1)
    keep = cnt[dense] >= MIN_GROUP                                   # [T]
    if not keep.any():
        return z
    dense, x = dense[keep], vals[keep]
    n_cells = len(ids)
    cnt = np.bincount(dense, minlength=n_cells)                      # [C] (0 for dropped cells)
    base = np.concatenate(([0], np.cumsum(cnt)[:-1]))               # [C] first sorted slot of each cell
    lo, hi = base + np.maximum(cnt - 1, 0) // 2, base + cnt // 2     # [C] middle slots
    used = cnt > 0

    def median(v: np.ndarray) -> np.ndarray:                         # [K] -> [C]
        s = _cell_sorted(v, dense)
        out = np.zeros(n_cells)
        out[used] = 0.5 * (s[lo[used]] + s[np.minimum(hi[used], len(s) - 1)])
        return out

    dev = np.abs(x - median(x)[dense])                               # [K]
    mad = median(dev)                                                # [C]
    mean_ad = np.bincount(dense, weights=dev, minlength=n_cells) / np.maximum(cnt, 1)  # [C]
    scale = np.where(mad > 0, 1.4826 * mad, 1.2533 * mean_ad)[dense]  # [K]
    z[keep] = np.divide(dev, scale, out=np.zeros_like(dev), where=scale > 0)
    return z


def line_outlier_z(n_lines: int, num_lines: np.ndarray, num_vars: np.ndarray, num_values: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """([L] largest z of each line's numbers, [T] z of each number)."""
    z = robust_z(num_vars, num_values)                               # [T]
    best = np.zeros(n_lines)                                         # [L]
    if len(z):
        np.maximum.at(best, num_lines, z)
    return best, z
