"""Numeric outliers: each number against the other values of its template variable.

What the digest reports as an outlier (digest._outliers): a value of a *quantity* (is_quantity: a
name like `latency`, `_ms`, `size`, `bytes`, `pct`, `count`, `thp`, or values with a unit such as
`35ms`, `98%`, `12KB`, or decimal fractions; never ids, sequence numbers, ports, pids, versions,
codes, epochs, hex or e-notation), of a variable seen at least MIN_SAMPLE times, whose robust z
is at least Z_OUTLIER and which lies outside the range of the variable's other, inlying values
(z below Z_OUTLIER) by at least FAR of that range (far_outside): the range it is quoted against
never contains it.

A variable's values (at least MIN_GROUP of them) are compared by a robust
z-score: |x - median| / (1.4826 MAD); when more than half are equal (MAD = 0)
the scale falls back to 1.2533 * mean absolute deviation, so one deviant among
n >= 5 equal values still stands out.

The worker's pass gets these scores from the C++ templater (ext/core/templater.cpp,
robust_z: Templates.num_z and line_z); the numpy version here is the reference the
property test holds it to (tests/digest/test_digest_templates.py), and the thresholds.
"""

from __future__ import annotations

import re

import numpy as np

MIN_GROUP = 5         # values of one variable needed before they are compared
Z_OUTLIER = 3.5       # robust z from which a number is an outlier (Iglewicz & Hoaglin)
MIN_SAMPLE = 10       # values of one variable needed before the digest names an outlier of it
FAR = 0.25            # an outlier lies at least this share of the inliers' range beyond it

_QUANTITY = re.compile(r"(?:^|[_.\-])(?:ms|us|ns|sec|secs|seconds|latency|delay|duration|rtt|elapsed|size|bytes?|"
                       r"len|length|pct|percent|ratio|rate|util|utilization|load|count|cnt|total|mbps|kbps|gbps|bps|"
                       r"thp|throughput|mem|memory|cpu|temp|temperature|usage|queue|depth|kb|mb|gb|retries|attempts|"
                       r"succ|att|drops?|loss|jitter|speed|used|free|avail)(?:$|[_.\-])|(?:ms|bytes|size|pct)$", re.I)
_NOT_QUANTITY = re.compile(r"(?:^|[_.\-])(?:id|seq|sn|port|pid|tid|uid|gid|version|ver|epoch|timestamp|ts|code|"
                           r"cause|status|rc|errno|index|idx|line|no|nr|key|hash|serial)$", re.I)
_UNIT = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:ms|us|µs|ns|s|sec|min|h|%|[kKMGT]i?[bB]|[bB]|bytes|[kMG]?bps|dBm?|C)$")
_DECIMAL = re.compile(r"^[-+]?\d+\.\d+$")
_ENOTATION = re.compile(r"\d[eE][-+]?\d")


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


def is_quantity(name: str, v) -> bool:
    """Whether a template variable (templates.VarSummary) holds a quantity, not an id, code or time."""
    values = [val for val, _ in v.top]
    if not values or v.kind not in ("number", "other") or any(_ENOTATION.search(x) for x in values):
        return False
    if abs(v.max) >= 1e9 or _NOT_QUANTITY.search(name):
        return False      # epochs and ids are no magnitudes
    if _QUANTITY.search(name):
        return True
    share = sum(bool(_UNIT.match(x) or _DECIMAL.match(x)) for x in values) / len(values)
    return share >= 0.5


def far_outside(x: float, lo: float, hi: float) -> bool:
    """x lies outside [lo, hi] by at least FAR of its width (any distance when the inliers are all equal)."""
    gap = lo - x if x < lo else x - hi
    return gap > 0 and gap >= FAR * (hi - lo)
