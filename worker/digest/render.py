"""The digest in plain English: digest mode's `summary` (deterministic, no model).

    2585 lines from smf-1 (pm), 16:36–21:06: 3 ERROR, 12 WARN. Commonest: "heartbeat ok seq=<n>" ×1204.
    Failures: "S1 link down: SCTP association lost to <*>" ×3 from 21:06:40. Outlier: line 7
    dl_thp_mbps=3.1 (others 50–900).
"""

from __future__ import annotations

import re

from worker.digest.timeparse import parse_line

MAX_PATTERN_CHARS = 90
_LEADING = re.compile(r"^(?:(?:<ts>|<\*>|<n>|<hex>|<ip>|<uuid>)[\s|;,]*|[\[\](){}]+\s*|"
                      r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) )+")
_LEVEL_WORD = re.compile(r"^(?:FATAL|CRITICAL|CRIT|SEVERE|ERROR|ERR|WARN|WARNING|NOTICE|INFO|DEBUG|TRACE)\b[:\s]*")


def _count(n: int) -> str:
    return f"{n:,}"


def _clock(stamp: str, seconds: bool = False) -> str:
    """hh:mm (or hh:mm:ss) of an ISO stamp, yearless ones too (a document spans hours, not days)."""
    _, sep, time_of_day = stamp.partition("T")
    return time_of_day[:8 if seconds else 5] if sep and len(time_of_day) >= 8 else stamp


def short_pattern(pattern: str) -> str:
    """A template as an operator reads it: leading timestamp/host placeholders and the level dropped."""
    p = _LEVEL_WORD.sub("", _LEADING.sub("", pattern)).strip() or pattern.strip()
    return p if len(p) <= MAX_PATTERN_CHARS else p[:MAX_PATTERN_CHARS - 1] + "…"


def _failure(t: dict) -> str:
    text = f'"{short_pattern(t["pattern"])}" ×{_count(t["count"])}'
    stamp = parse_line(t["example"])
    if stamp is not None:
        text += f" from {_clock(stamp.text, seconds=True)}"
    else:
        text += f" from line {t['first_line']}"
    return text


def render(d: dict, source: str | None = None, kind: str | None = None) -> str:
    """d: the output's `digest` object (plain data, worker/digest/digest.py)."""
    head = f"{_count(d['lines'])} line{'s' if d['lines'] != 1 else ''}"
    if source:
        head += f" from {source.split('/')[0]}"
    if kind:
        head += f" ({kind})"
    span = d["span"]
    if span is not None:
        first, last = _clock(span["first"]), _clock(span["last"])
        head += f", {first}" + (f"–{last}" if last != first else "") + (" UTC" if span["first"].endswith("Z") else "")
    severe = {k: v for k, v in d["severity"].items() if k in ("FATAL", "CRITICAL", "ERROR", "WARN")}
    parts = [head + (": " + ", ".join(f"{_count(n)} {lv}" for lv, n in severe.items()) if severe else "") + "."]
    if d["templates"]:
        t, total = d["templates"][0], d["templates_total"]
        parts.append(f'Commonest: "{short_pattern(t["pattern"])}" ×{_count(t["count"])}'
                     + (f" of {_count(total)} templates." if total > 1 else "."))
    failures, omitted = d["failures"], d["omitted"]["failures"]
    if failures:
        more = f" (+{omitted} more)" if omitted else ""
        parts.append("Failures: " + "; ".join(_failure(t) for t in failures[:3]) + more + ".")
    if d["outliers"]:
        parts.append(outlier_sentence(d["outliers"][0]))
    if not failures and not d["outliers"]:
        parts.append("No failures or outliers found.")
    return " ".join(parts)


def outlier_sentence(o: dict) -> str:
    return f"Outlier: line {o['line']} {o['name']}={o['value']:g} (others {o['others_min']:g}–{o['others_max']:g})."
