"""Numeric outliers: each number against the other values of its template variable.

What the digest reports as an outlier (digest._outliers): a value of a *quantity* (is_quantity: a
name like `latency`, `_ms`, `size`, `bytes`, `pct`, `count`, `thp`, or values with a unit such as
`35ms`, `98%`, `12KB`, or decimal fractions; never ids, sequence numbers, ports, pids, versions,
codes, epochs, hex or e-notation), of a variable seen at least MIN_SAMPLE times, whose robust z
is at least Z_OUTLIER and which lies outside the range of the variable's other, inlying values
(z below Z_OUTLIER) by at least FAR of that range (far_outside): the range it is quoted against
never contains it.

A variable's values (at least 5 of them: the templater's min_group) are compared by a robust
z-score: |x - median| / (1.4826 MAD); when more than half are equal (MAD = 0)
the scale falls back to 1.2533 * mean absolute deviation, so one deviant among
n >= 5 equal values still stands out.

The worker's pass gets these scores from the C++ templater (ext/core/templater_values.cpp,
robust_z: Templates.num_z and line_z); a property test holds it to a numpy reference
(tests/outliers_reference.py). This module holds the thresholds.
"""

from __future__ import annotations

import re

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
