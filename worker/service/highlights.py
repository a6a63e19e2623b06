"""Highlights: the input lines that matter most, chosen without a model.

A line scores by severity words (error, fail, timeout, ...), by how rare its
shape is within the document (a line unlike the others is news; the
thousandth heartbeat is not), and loses score for being a near-repeat.
Deterministic: equal input gives equal highlights.
"""

from __future__ import annotations

import re
from collections import Counter

_SEVERITY = {
    "panic": 6.0, "fatal": 6.0, "crit": 5.0, "critical": 5.0, "emerg": 5.0, "alert": 4.0,
    "segfault": 6.0, "core": 2.0, "dump": 2.0, "oom": 5.0, "killed": 4.0,
    "error": 4.0, "err": 3.0, "fail": 4.0, "failed": 4.0, "failure": 4.0, "exception": 4.0,
    "timeout": 3.5, "timed": 2.0, "refused": 3.0, "reset": 2.0, "unreachable": 3.5, "down": 3.0,
    "drop": 2.5, "dropped": 2.5, "lost": 3.0, "reject": 3.0, "rejected": 3.0, "denied": 3.0,
    "warn": 1.5, "warning": 1.5, "retry": 1.0, "retrying": 1.0, "degraded": 2.5, "overload": 3.0,
    "abort": 3.0, "aborted": 3.0, "restart": 2.0, "restarted": 2.0, "alarm": 3.0,
}
_WORD = re.compile(r"[a-z]+")
_SHAPE = re.compile(r"\d+|0x[0-9a-f]+|[0-9a-f]{8,}")


def _shape(line: str) -> str:
    """A line with its numbers and ids blanked: lines of one shape are repeats."""
    return _SHAPE.sub("#", line.lower()).strip()


def highlights(lines: list[str], k: int) -> list[str]:
    """The k most telling non-empty lines, in their original order."""
    if k <= 0:
        return []
    cands = [(i, ln.strip()) for i, ln in enumerate(lines) if ln.strip()]
    if len(cands) <= k:
        return [ln for _, ln in cands]
    shapes = [_shape(ln) for _, ln in cands]
    freq = Counter(shapes)
    scored = []
    for (i, ln), shape in zip(cands, shapes):
        words = _WORD.findall(ln.lower())
        severity = max((_SEVERITY.get(w, 0.0) for w in words), default=0.0)
        rarity = 1.0 / freq[shape]
        scored.append((severity + 2.0 * rarity, -i, i, ln, shape))
    scored.sort(reverse=True)
    chosen, used = [], set()
    for _, _, i, ln, shape in scored:
        if shape in used:
            continue
        used.add(shape)
        chosen.append((i, ln))
        if len(chosen) == k:
            break
    return [ln for _, ln in sorted(chosen)]
