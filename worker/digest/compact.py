"""Compaction: the document as the model sees it, each line template once.

In order of first appearance, each template's first line verbatim, then (when
it has more lines) one annotation of the rest:

    2026-12-01T10:00:01Z smf-1 INFO heartbeat ok seq=1
      [×1204 lines 1–2585; seq 1–2584]

Lines of a template that occur once stay verbatim (they are their template's
first line). Severe lines (a severity word scoring SEVERE or more) and
numeric outliers of a repeated template stay verbatim too, marked `  ! `,
up to MAX_EXTRA per template; failure lines (level WARN or worse) up to
FAILURE_EXTRA per template, so their values (codes, ids, addresses, paths,
sizes) reach the model (the annotation's count covers every line). No
template is ever dropped. The result is not used when it saves less than
`min_saving` of the characters (the caller checks tokens as well).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from worker.digest.digest import Analysis
from worker.digest.outliers import Z_OUTLIER
from worker.digest.templates import Template, VarSummary
from worker.digest.words import SEVERE

MAX_EXTRA = 3          # verbatim severe/outlier lines per template beyond its first
FAILURE_EXTRA = 10     # verbatim lines of a failure template beyond its first (docs/digest.md: the trade-off)
MAX_ANNOTATED_VARS = 4
ANNOTATION = re.compile(r"^  \[×(\d+) lines (\d+)–(\d+)")
EXTRA_PREFIX = "  ! "


@dataclass(frozen=True)
class Compaction:
    text: str
    applied: bool          # False: text is the raw document (too little saved)
    raw_chars: int
    compact_chars: int     # length of the compacted text (even when not applied)


def _num(x: float) -> str:
    return f"{x:.6g}"


def _describe(v: VarSummary, i: int) -> str | None:
    name = v.key or f"v{i + 1}"
    if v.kind == "time" or v.distinct <= 1:
        return None
    if v.numeric and v.numeric == v.occurrences:
        return f"{name} {_num(v.min)}–{_num(v.max)}"
    if v.distinct <= 5 and not v.distinct_capped and v.top:
        return f"{name}: " + ", ".join(f"{val[:40]} ×{n}" for val, n in v.top)
    return f"{name}: {v.distinct}{'+' if v.distinct_capped else ''} values"


def annotation(t: Template) -> str:
    parts = [f"×{t.count} lines {t.first_line + 1}–{t.last_line + 1}"]
    described = [d for d in (_describe(v, i) for i, v in enumerate(t.vars)) if d]
    parts.extend(described[:MAX_ANNOTATED_VARS])
    return "  [" + "; ".join(parts) + "]"


def _extras(a: Analysis, failure_extra: int) -> dict[int, list[int]]:
    """Template -> its severe, outlier or failure lines beyond its first (MAX_EXTRA at most, failure_extra
    for a template with failure lines: those lines keep their values: codes, ids, addresses, paths, sizes)."""
    tm = a.templates
    notable = (tm.line_severity >= SEVERE) | (a.line_z >= Z_OUTLIER)        # [L] bool
    failing: set[int] = set()
    for f in a.failures:
        notable[f["lines"]] = True
        failing.add(f["template"])
    firsts = np.array([t.first_line for t in tm.templates], dtype=np.int64)
    notable[firsts] = False
    out: dict[int, list[int]] = {}
    lines = np.flatnonzero(notable & (tm.line_template >= 0))
    for line, k in zip(lines.tolist(), tm.line_template[lines].tolist()):
        lst = out.setdefault(k, [])
        if len(lst) < (failure_extra if k in failing else MAX_EXTRA):
            lst.append(line)
    return out


def compact_text(a: Analysis, failure_extra: int = FAILURE_EXTRA) -> str:
    tm = a.templates
    extras = _extras(a, failure_extra)
    out: list[str] = []
    for t in tm.templates:
        out.append(tm.lines[t.first_line].rstrip())
        if t.count > 1:
            out.append(annotation(t))
        more = extras.get(t.index)
        if more:
            out.extend(EXTRA_PREFIX + tm.lines[j].strip() for j in more)
    return "\n".join(out)


def compact(a: Analysis, raw: str, min_saving: float) -> Compaction:
    """The compacted document, applied only when it saves at least min_saving of the characters."""
    text = compact_text(a)
    applied = len(text) <= (1.0 - min_saving) * len(raw)
    return Compaction(text if applied else raw, applied, len(raw), len(text))


def expand(text: str) -> list[tuple[str, int]]:
    """(first line, line count) of each template in a compacted text: the inverse the tests check."""
    out: list[tuple[str, int]] = []
    for line in text.split("\n"):
        m = ANNOTATION.match(line)
        if m:
            out[-1] = (out[-1][0], int(m.group(1)))
        elif not line.startswith(EXTRA_PREFIX):
            out.append((line, 1))
    return out
