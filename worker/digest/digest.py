"""Building a document's digest from its Templates (no second pass over the text): plain dicts, no pydantic."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from worker.digest.clock import sort_keys, true_span
from worker.digest.failures import line_ranks, ranked_failures, severity_counts
from worker.digest.formats import Read
from worker.digest.levels import level_of_pattern
from worker.messages.levels import ORDER
from worker.digest.outliers import MIN_SAMPLE, Z_OUTLIER, far_outside, is_quantity
from worker.digest.templates import Template, Templates
from worker.digest.timeparse import span, stamp_of

MAX_TEMPLATES = 8
MAX_FAILURES = 8
MAX_ENTITIES = 10
MAX_OUTLIERS = 5
MAX_EXAMPLE_CHARS = 300
MAX_VARIABLES = 24       # a template's variables summarized (its pattern shows at most MAX_EXAMPLE_CHARS)
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
    line_rank: np.ndarray | None = None   # [L] int8 level rank of each line (worker/messages/levels.py ORDER), -1 none
    failures: tuple = ()        # ranked failure entries (failures.ranked_failures), all of them
    read: Read | None = None    # the format layer's result


def _variables(t: Template) -> list[dict]:
    out = []
    for i, v in enumerate(t.vars[:MAX_VARIABLES]):
        num = v.numeric > 0
        out.append({"name": v.key or f"v{i + 1}", "kind": v.kind, "distinct": v.distinct,
                    "distinct_capped": v.distinct_capped, "min": v.min if num else None,
                    "median": v.median if num else None, "max": v.max if num else None,
                    "top": [{"value": val[:120], "count": c} for val, c in v.top
                            if v.kind != "time" and (c > 1 or (v.distinct <= 5 and not v.distinct_capped))]})
    return out


def _summary(tm: Templates, t: Template) -> dict:
    return {"pattern": t.pattern[:MAX_EXAMPLE_CHARS], "count": t.count, "first_line": t.first_line + 1,
            "last_line": t.last_line + 1, "example": tm.lines[t.first_line].strip()[:MAX_EXAMPLE_CHARS],
            "level": level_of_pattern(t.pattern), "variables": _variables(t), "first_time": None, "last_time": None}


def _entities(tm: Templates) -> list[dict]:
    counts: dict[tuple[str, str], int] = {}
    for t in tm.templates:
        for v in t.vars:
            kind = "ip" if v.kind == "ip" else _ENTITY_KEYS.get(v.key.lower())
            if kind is None and v.kind in _NEVER_ELEMENTS:
                continue  # these start with a digit or hold only hex letters: no element name matches
            for value, n in v.top:   # an element name ends with a digit (ELEMENT's `\d+$`): look only there
                k = kind or ("element" if (value[-1:].isdigit() or value[-1:] == "\n") and ELEMENT.match(value)
                             else None)
                if k is not None:
                    key = (k, value.split(":")[0] if k == "ip" else value)
                    counts[key] = counts.get(key, 0) + n
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"kind": k, "value": v, "count": n} for (k, v), n in ranked]


def _outliers(tm: Templates) -> list[dict]:
    """Numeric outliers of quantities (outliers.is_quantity), outside their variable's inlier range."""
    z = tm.num_z
    hits = np.flatnonzero(z >= Z_OUTLIER)
    if not len(hits):
        return []
    bases = [t.var_base for t in tm.templates]     # ascending: a variable's template is the last base at or below it
    order = hits[np.lexsort((hits, -z[hits]))]     # farthest first, then earlier
    out, lines_seen, ranges, names = [], set(), {}, {}
    for j in order.tolist():
        var = int(tm.num_vars[j])
        if var not in names:   # its name when it is a quantity of enough values, else None (once per variable)
            t = tm.templates[bisect.bisect_right(bases, var) - 1]
            i = var - t.var_base
            v = t.vars[i] if 0 <= i < len(t.vars) else None
            name = (v.key or f"v{i + 1}") if v is not None else ""
            names[var] = name if v is not None and v.occurrences >= MIN_SAMPLE and is_quantity(name, v) else None
        if names[var] is None:
            continue
        if var not in ranges:
            inl = tm.num_values[(tm.num_vars == var) & (z < Z_OUTLIER)]
            ranges[var] = (float(inl.min()), float(inl.max())) if len(inl) else None
        if ranges[var] is None:
            continue
        lo, hi = ranges[var]
        x = float(tm.num_values[j])
        if not far_outside(x, lo, hi):
            continue
        line = int(tm.num_lines[j])
        if line in lines_seen:
            continue
        lines_seen.add(line)
        out.append({"line": line + 1, "name": names[var], "value": x, "others_min": lo, "others_max": hi,
                    "z": round(float(z[j]), 2), "text": tm.lines[line].strip()[:MAX_EXAMPLE_CHARS]})
    return out


def template_severity(tm: Templates) -> np.ndarray:
    """[K] float32: the highest severity word over each template's lines (from the templater's pass)."""
    return tm.template_severity


def _stamp_text(stamps: list[str], j: int | None) -> str | None:
    if j is None:
        return None
    st = stamp_of(stamps[j])
    return st.text if st is not None else None


def _failure_summary(tm: Templates, f: dict, stamps: list[str]) -> dict:
    t = tm.templates[f["template"]]
    out = _summary(tm, t)
    out.update(count=f["count"], first_line=f["first_line"] + 1, last_line=f["last_line"] + 1, level=f["level"],
               example=tm.lines[f["first_line"]].strip()[:MAX_EXAMPLE_CHARS],
               first_time=_stamp_text(stamps, f["first_timed"]), last_time=_stamp_text(stamps, f["last_timed"]))
    return out


def _time_span(tm: Templates, r: Read | None, keys: list[str]) -> dict | None:
    if r is not None and any(keys):
        ts = true_span(r.stamps, keys)
        if ts is not None:
            return {"first": ts.first.text, "last": ts.last.text, "form": ts.first.form,
                    "seconds": round(max(0.0, ts.last.seconds - ts.first.seconds), 3),
                    "zone": ts.zone, "out_of_order": ts.out_of_order,
                    "first_line": ts.first_line + 1, "last_line": ts.last_line + 1}
    first, last = span(tm.lines, tm.line_clock)
    if first is None or last is None:
        return None
    if last.seconds < first.seconds:
        first, last = last, first
    return {"first": first.text, "last": last.text, "form": first.form,
            "seconds": round(max(0.0, last.seconds - first.seconds), 3),
            "zone": "UTC" if first.text.endswith("Z") else None, "out_of_order": 0, "first_line": None,
            "last_line": None}


def _host_entities(r: Read | None) -> list[dict]:
    if r is None or not r.hosts:
        return []
    counts = Counter(r.hosts)
    counts.pop("", None)
    counts.pop("-", None)
    if len(counts) > 0.5 * max(1, len(r.hosts)):   # one per line: not hosts but something else
        return []
    return [{"kind": "host", "value": h, "count": n} for h, n in counts.most_common(MAX_ENTITIES)]


def build_digest(tm: Templates, r: Read | None = None) -> Analysis:
    """The digest of a templater pass; r: the format layer's result the pass was made from (or None)."""
    levels = r.levels if r is not None else [None] * len(tm.lines)
    ranks, inherited = line_ranks(tm, levels, r.continued if r is not None else None)
    stamps = r.stamps if r is not None else []
    keys = sort_keys(stamps, r.stamp_masks) if stamps and any(stamps) else []
    ranked = sorted(tm.templates, key=lambda t: (-t.count, t.first_line))
    fails = ranked_failures(tm, ranks, keys, inherited)
    entities = _host_entities(r) + _entities(tm)
    outliers = _outliers(tm)
    by_level: dict[str, int] = {}
    for f in fails[MAX_FAILURES:]:
        by_level[f["level"]] = by_level.get(f["level"], 0) + 1
    digest = {
        "lines": tm.nonblank, "templates_total": len(tm.templates), "span": _time_span(tm, r, keys),
        "severity": severity_counts(ranks),
        "templates": [_summary(tm, t) for t in ranked[:MAX_TEMPLATES]],
        "failures": [_failure_summary(tm, f, stamps) for f in fails[:MAX_FAILURES]],
        "entities": entities[:MAX_ENTITIES], "outliers": outliers[:MAX_OUTLIERS],
        "omitted": {"templates": max(0, len(ranked) - MAX_TEMPLATES), "failures": max(0, len(fails) - MAX_FAILURES),
                    "entities": max(0, len(entities) - MAX_ENTITIES),
                    "outliers": max(0, len(outliers) - MAX_OUTLIERS),
                    "failures_by_level": {lv: by_level[lv] for lv in ORDER if lv in by_level}},
        "format": r.form if r is not None else None, "cleaned_lines": r.cleaned if r is not None else 0,
        "pm": None}
    return Analysis(tm, digest, tm.line_z, tm.template_severity, ranks, tuple(fails), r)
