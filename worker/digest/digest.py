"""Building a document's digest from its Templates (no second pass over the text): plain dicts, no pydantic."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from worker.digest.levels import count_levels, level_of_pattern
from worker.digest.outliers import Z_OUTLIER
from worker.digest.templates import Template, Templates
from worker.digest.timeparse import span
from worker.digest.words import SEVERE

MAX_TEMPLATES = 8
MAX_FAILURES = 5
MAX_ENTITIES = 10
MAX_OUTLIERS = 5
MAX_EXAMPLE_CHARS = 300
ELEMENT = re.compile(r"^(?:gnb|enb|ng-enb|amf|smf|upf|nrf|ausf|udm|udr|pcf|nssf|nef|mme|sgw|pgw|hss|cu-up|cu-cp|du|ru|"
                     r"bsc|rnc|msc|ims|pcscf|scscf|sbc)[-_]?\d+$", re.IGNORECASE)
_NEVER_ELEMENTS = frozenset({"number", "hex", "uuid", "time"})
_ENTITY_KEYS = {"host": "host", "hostname": "host", "node": "host", "server": "host",
                "ne": "element", "element": "element", "nf": "element", "peer": "element",
                "cell": "cell", "cell_id": "cell", "cellid": "cell", "nci": "cell", "eci": "cell",
                "cause": "cause", "code": "cause", "errno": "cause", "error_code": "cause", "reason": "cause",
                "status": "cause", "rc": "cause"}


DigestDict = dict  # the output message's `digest` object as plain data (schema: worker/messages/digest.py)


@dataclass(frozen=True)
class Analysis:
    """What one pass gives every consumer: the templates, the digest and per-line scores."""
    templates: Templates
    digest: DigestDict          # JSON-ready; validated once, at the output message (worker/messages/models.py)
    line_z: np.ndarray          # [L] float64 largest outlier z of each line
    template_severity: np.ndarray  # [K] float32 highest severity word over each template's lines


def _variables(t: Template) -> list[dict]:
    out = []
    for i, v in enumerate(t.vars):
        num = v.numeric > 0
        out.append({"name": v.key or f"v{i + 1}", "kind": v.kind, "distinct": v.distinct,
                    "distinct_capped": v.distinct_capped, "min": v.min if num else None,
                    "median": v.median if num else None, "max": v.max if num else None,
                    "top": [{"value": val[:120], "count": c} for val, c in v.top if c > 1 and v.kind != "time"]})
    return out


def _summary(tm: Templates, t: Template) -> dict:
    return {"pattern": t.pattern[:MAX_EXAMPLE_CHARS], "count": t.count, "first_line": t.first_line + 1,
            "last_line": t.last_line + 1, "example": tm.lines[t.first_line].strip()[:MAX_EXAMPLE_CHARS],
            "level": level_of_pattern(t.pattern), "variables": _variables(t)}


def _entities(tm: Templates) -> list[dict]:
    counts: dict[tuple[str, str], int] = {}
    for t in tm.templates:
        for v in t.vars:
            kind = "ip" if v.kind == "ip" else _ENTITY_KEYS.get(v.key.lower())
            if kind is None and v.kind in _NEVER_ELEMENTS:
                continue  # these start with a digit or hold only hex letters: no element name matches
            for value, n in v.top:
                k = kind or ("element" if ELEMENT.match(value) else None)
                if k is not None:
                    key = (k, value.split(":")[0] if k == "ip" else value)
                    counts[key] = counts.get(key, 0) + n
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"kind": k, "value": v, "count": n} for (k, v), n in ranked]


def _outliers(tm: Templates) -> list[dict]:
    z = tm.num_z
    hits = np.flatnonzero(z >= Z_OUTLIER)
    if not len(hits):
        return []
    order = hits[np.lexsort((hits, -z[hits]))]     # farthest first, then earlier
    names = {t.var_base + i: (v.key or f"v{i + 1}") for t in tm.templates for i, v in enumerate(t.vars)}
    out, lines_seen = [], set()
    for j in order.tolist():
        line = int(tm.num_lines[j])
        if line in lines_seen:
            continue
        lines_seen.add(line)
        var = int(tm.num_vars[j])
        others = tm.num_values[(tm.num_vars == var) & (np.arange(len(z)) != j)]
        out.append({"line": line + 1, "name": names.get(var, "value"), "value": float(tm.num_values[j]),
                    "others_min": float(others.min()), "others_max": float(others.max()),
                    "z": round(float(z[j]), 2), "text": tm.lines[line].strip()[:MAX_EXAMPLE_CHARS]})
    return out


def template_severity(tm: Templates) -> np.ndarray:
    """[K] float32: the highest severity word over each template's lines (from the templater's pass)."""
    return tm.template_severity


def build_digest(tm: Templates) -> Analysis:
    sev = tm.template_severity.tolist()
    ranked = sorted(tm.templates, key=lambda t: (-t.count, t.first_line))
    failing = [t for t in tm.templates if sev[t.index] >= SEVERE or
               level_of_pattern(t.pattern) in ("FATAL", "CRITICAL", "ERROR")]
    entities = _entities(tm)
    outliers = _outliers(tm)
    first, last = span(tm.lines, tm.line_clock)
    time_span = None if first is None or last is None else {
        "first": first.text, "last": last.text, "form": first.form,
        "seconds": round(max(0.0, last.seconds - first.seconds), 3)}
    digest = {
        "lines": tm.nonblank, "templates_total": len(tm.templates), "span": time_span,
        "severity": count_levels(tm.templates),
        "templates": [_summary(tm, t) for t in ranked[:MAX_TEMPLATES]],
        "failures": [_summary(tm, t) for t in failing[:MAX_FAILURES]],
        "entities": entities[:MAX_ENTITIES], "outliers": outliers[:MAX_OUTLIERS],
        "omitted": {"templates": max(0, len(ranked) - MAX_TEMPLATES), "failures": max(0, len(failing) - MAX_FAILURES),
                    "entities": max(0, len(entities) - MAX_ENTITIES),
                    "outliers": max(0, len(outliers) - MAX_OUTLIERS)}}
    return Analysis(tm, digest, tm.line_z, tm.template_severity)
