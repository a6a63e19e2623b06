"""Highlights: the input lines that matter most, chosen without a model.

A line scores by three signals, all from the document's one templater pass
(worker/digest/templates.py, C++ in ext/core/templater.cpp):
- severity words (error, fail, timeout, ...; worker/digest/words.py): the
  highest one in the line;
- rarity of its line template: a line unlike the others is news, the
  thousandth heartbeat is not;
- numeric outliers: each number is compared with the other values of its
  template variable (at least 5) by a robust z-score (worker/digest/outliers.py).
  A PM row whose counter is far from the other rows scores like a severity word.
Selection takes the best line of each template first; another line of a chosen
template is taken only if it is itself an outlier. If fewer than k lines remain
after that, the best skipped lines fill the rest, so the result always has
min(k, non-empty lines) lines. Deterministic: equal input gives equal
highlights; equal scores go to the farther outlier, then to the earlier line.
"""

from __future__ import annotations

import numpy as np

from worker.digest.outliers import Z_OUTLIER
from worker.digest.templates import analyze

RARITY_WEIGHT = 2.0   # a line of a unique template scores this much


def _outlier_score(z: np.ndarray) -> np.ndarray:
    """0 below Z_OUTLIER; from there like an "error" (4.0), growing to a "fatal" (6.0) at 4x."""
    grown = 4.0 + np.log2(np.maximum(z, Z_OUTLIER) / Z_OUTLIER)
    return np.where(z >= Z_OUTLIER, np.minimum(grown, 6.0), 0.0)


def _select(order: list[int], shapes: list[int], outlier: list[bool], k: int) -> list[int]:
    """Best first, one line per shape unless the line is an outlier; then fill up to k."""
    chosen: list[int] = []
    skipped: list[int] = []
    used: set[int] = set()
    for j in order:
        if shapes[j] in used and not outlier[j]:
            skipped.append(j)
            continue
        used.add(shapes[j])
        chosen.append(j)
        if len(chosen) == k:
            return chosen
    return chosen + skipped[: k - len(chosen)]


def highlights(lines: list[str], k: int) -> list[str]:
    """The k most telling non-empty lines, stripped, in their original order (one templater pass)."""
    if k <= 0:
        return []
    cands = [s for s in (ln.strip() for ln in lines) if s]
    if len(cands) <= k:
        return cands
    tm = analyze([c.replace("\n", " ") for c in cands])
    return select(cands, tm.line_template, tm.line_severity, tm.line_z, k)


def select(lines: list[str], shape: np.ndarray, severity: np.ndarray, z: np.ndarray, k: int) -> list[str]:
    """The k best non-blank lines of a templater pass (shape [L] template ids, -1 blank; severity [L];
    z [L] outlier z), stripped, in their original order."""
    rows = np.flatnonzero(shape >= 0)                              # [N] non-blank lines
    if len(rows) <= k:
        return [lines[j].strip() for j in rows.tolist()]
    shape, z = shape[rows], z[rows]
    rarity = RARITY_WEIGHT / np.bincount(shape)[shape]             # [N]
    score = severity[rows].astype(np.float64) + _outlier_score(z) + rarity  # [N]
    # best first; on equal scores the farther outlier, then the earlier line (lexsort is stable)
    order = np.lexsort((-z, -score)).tolist()
    chosen = _select(order, shape.tolist(), (z >= Z_OUTLIER).tolist(), k)
    return [lines[rows[j]].strip() for j in sorted(chosen)]
