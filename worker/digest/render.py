"""The digest in plain English: digest mode's `summary` (deterministic, no model).

    1,000 lines from cu-up-4 (nf), 2026-12-01 01:00:00–01:16:39 UTC: 2 ERROR, 46 WARN. Failures: ERROR
    "S1 link down: SCTP association lost to gnb-003" at 01:07:41 (line 402); WARN "retrying request to <*>
    attempt=<n>" ×46 01:00:20–01:16:30 (to: gnb-003 ×20, amf-2 ×15; attempt=1 ×20, 2 ×15, 3 ×11).
    Commonest: "heartbeat ok seq=<n> latency_ms=<n>" ×515 of 7 templates. Hosts: cu-up-4 ×1,000.
    Outlier: line 7 dl_thp_mbps=3.1 (others 50–900).

Every figure can be checked against the lines: counts, line numbers, times as the log writes them
(converted to UTC when the log gives a zone; dates shown when the span crosses a day; yearless logs
stay yearless), the values of each variable with their counts.
"""

from __future__ import annotations

import re

from worker.digest.clock import days
from worker.messages.levels import FAILING, NAMES

MAX_PATTERN_CHARS = 90
MAX_FAILURES_SHOWN = 3
_LEADING = re.compile(r"^(?:(?:<ts>|<\*>|<n>|<hex>|<ip>|<uuid>)[\s|;,]*|[\[\](){}]+\s*|"
                      r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) )+")
_LEVEL_WORD = re.compile(rf"^(?:{'|'.join(sorted((w.upper() for w in NAMES), key=len, reverse=True))})\b[:\s]*")
_PLACEHOLDER = re.compile(r"<(?:n|hex|ip|uuid|ts|q|\*)>")
_WORDS = re.compile(r"[A-Za-z]{3,}")
_PHRASE = re.compile(r'"[^"]*"')
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _count(n: int) -> str:
    return f"{n:,}"


def _date(stamp: str) -> str:
    """The date part of an ISO stamp ("2026-12-01", or "Dec 1" for a yearless one)."""
    day = stamp.partition("T")[0]
    if day.startswith("--") and len(day) == 7:
        return f"{_MONTHS[int(day[2:4]) - 1]} {int(day[5:7])}"
    return day


def _clock(stamp: str, seconds: bool = True) -> str:
    _, sep, time_of_day = stamp.partition("T")
    return time_of_day[:8 if seconds else 5] if sep and len(time_of_day) >= 8 else stamp


def time_range(first: str, last: str, zone: str | None = None, seconds: float | None = None) -> str:
    """first–last as a reader checks it: the date once, both dates when they differ, the zone when known."""
    z = f" {zone}" if zone else ""
    if _date(first) != _date(last):
        text = f"{_date(first)} {_clock(first)} – {_date(last)} {_clock(last)}{z}"
        return text + (f" ({days(seconds)})" if seconds else "")
    if first == last:
        return f"{_date(first)} {_clock(first)}{z}"
    return f"{_date(first)} {_clock(first)}–{_clock(last)}{z}"


_KEEP = "\x00"   # stands for a space inside a value while a text is cut (a value is never cut)


def cut(text: str, limit: int = MAX_PATTERN_CHARS) -> str:
    """text shortened to about `limit` characters at a space, never inside a token or a value (spaces inside
    a value are written _KEEP by the caller): whole tokens while they fit, the first one always."""
    if len(text) <= limit:
        return text.replace(_KEEP, " ")
    b = text.rfind(" ", 0, limit)
    if b <= 0:
        b = text.find(" ", limit)
        if b < 0:
            return text.replace(_KEEP, " ")
    return text[:b].rstrip().replace(_KEEP, " ") + " …"


def short_pattern(pattern: str) -> str:
    """A template as an operator reads it: leading timestamp/host placeholders and the level dropped."""
    p = _LEVEL_WORD.sub("", _LEADING.sub("", pattern)).strip() or pattern.strip()
    return cut(p)


def display_pattern(t: dict) -> str:
    """The pattern with each variable that holds one value in every line written as that value."""
    variables = t.get("variables") or []
    pattern = t["pattern"]
    lead = _LEADING.match(pattern)
    skip = len(_PLACEHOLDER.findall(lead.group(0))) if lead else 0
    body = pattern[lead.end():] if lead else pattern
    it = iter(variables[skip:])

    def fill(m: re.Match) -> str:
        v = next(it, None)
        if v and v["distinct"] == 1 and not v["distinct_capped"] and v["top"]:
            return v["top"][0]["value"].replace(" ", _KEEP)
        return m.group(0)

    return short_pattern(_PLACEHOLDER.sub(fill, body))


def values_text(t: dict, limit: int = 3) -> str:
    """The values of a template's varying variables with their counts: `cause=11 ×7, 5001 ×2; host ∈ {..}`."""
    parts = []
    for v in t.get("variables") or []:
        if v["distinct"] <= 1 or not v["top"] or v["kind"] == "time":
            continue
        more = v["distinct"] - len(v["top"][:limit])
        shown = ", ".join(f"{x['value'][:40]} ×{_count(x['count'])}" for x in v["top"][:limit])
        if all(x["count"] == 1 for x in v["top"][:limit]):
            shown = "{" + ", ".join(x["value"][:40] for x in v["top"][:limit]) + (", …" if more > 0 else "") + "}"
            parts.append(f"{v['name']} ∈ {shown} ({v['distinct']}{'+' if v['distinct_capped'] else ''} distinct)")
            continue
        parts.append(f"{v['name']}={shown}" + (f" (+{more}{'+' if v['distinct_capped'] else ''} more)" if more > 0 else ""))
    return "; ".join(parts[:3])


def shown_pattern(t: dict) -> str:
    """The template as quoted: display_pattern, or its first line when the template is mostly placeholders
    (a quoted phrase, such as a request line, counts as one)."""
    shown = display_pattern(t)
    if len(_WORDS.findall(_PLACEHOLDER.sub(" ", _PHRASE.sub(" ", shown)))) < 2 and t.get("example"):
        return cut(t["example"])
    return shown


def commonest(d: dict) -> dict | None:
    """The commonest template that is no failure (neither among the failures nor WARN or worse by its text)."""
    failing = {f["pattern"] for f in d["failures"]}
    for t in d["templates"]:
        if t["pattern"] not in failing and t.get("level") not in FAILING:
            return t
    return None


def _failure(t: dict, dated: bool = False) -> str:
    """One failure: level, pattern, count, time (with its date when the document spans days), lines, values."""
    text = f'{t.get("level") or "ERROR"} "{shown_pattern(t)}"'
    if t["count"] > 1:
        text += f" ×{_count(t['count'])}"
    first, last = t.get("first_time"), t.get("last_time")
    if first and last:
        if first == last:
            text += f" at {time_range(first, last) if dated else _clock(first)}"
        else:
            text += " " + (f"{_clock(first)}–{_clock(last)}" if _date(first) == _date(last) else time_range(first, last))
    text += f" (line {t['first_line']}" + (f"–{t['last_line']}" if t["last_line"] != t["first_line"] else "") + ")"
    values = values_text(t)
    return text + (f" [{values}]" if values else "")


def _span(span: dict) -> str:
    text = time_range(span["first"], span["last"], span.get("zone"), span.get("seconds"))
    if span.get("out_of_order"):
        n = span["out_of_order"]
        text += f" ({_count(n)} line{'s' if n != 1 else ''} out of order)"
    return text


def _entities(entities: list[dict]) -> str:
    by_kind: dict[str, list[str]] = {}
    for e in entities:
        by_kind.setdefault(e["kind"], []).append(f"{e['value']} ×{_count(e['count'])}")
    names = {"host": "Hosts", "ip": "IPs", "element": "Elements", "cell": "Cells", "cause": "Causes"}
    return "; ".join(f"{names.get(k, k)}: " + ", ".join(v[:4]) for k, v in by_kind.items())


def _pm(pm: dict) -> str:
    head = f"PM file ({pm['standard']})"
    if pm.get("managed_element") or pm.get("sender"):
        head += f" from {pm.get('managed_element') or pm.get('sender')}"
    if pm.get("granularity_s"):
        head += f", {pm['granularity_s'] // 60} min granularity"
    if pm.get("begin") or pm.get("end"):
        head += f", {pm.get('begin') or '?'} to {pm.get('end') or '?'}"
    head += f": {_count(pm['objects'])} objects ({_count(pm['cells'])} cells), {pm['counters']} counters"
    head += f", {pm.get('nonzero_total', len(pm['nonzero']))} non-zero."
    if pm["failure_counters"]:
        head += " Failure counters: " + "; ".join(
            f"{c['name']} {c['total']:g} over {c['objects']} objects (most {c['max']:g} at {c['max_object']})"
            for c in pm["failure_counters"][:3]) + "."
    if pm["extremes"]:
        head += " Extremes: " + "; ".join(f"{e['counter']}={e['value']:g} at {e['object']} (median {e['median']:g})"
                                         for e in pm["extremes"][:3]) + "."
    return head


def render(d: dict, source: str | None = None, kind: str | None = None) -> str:
    """d: the output's `digest` object (plain data, worker/digest/digest.py)."""
    head = f"{_count(d['lines'])} line{'s' if d['lines'] != 1 else ''}"
    if source:
        head += f" from {source.split('/')[0]}"
    if kind:
        head += f" ({kind})"
    if d["span"] is not None:
        head += f", {_span(d['span'])}"
    severe = {k: v for k, v in d["severity"].items() if k in FAILING}
    parts = [head + (": " + ", ".join(f"{_count(n)} {lv}" for lv, n in severe.items()) if severe else "") + "."]
    if d.get("pm"):
        parts.append(_pm(d["pm"]))
    failures, omitted = d["failures"], d["omitted"]
    if failures:
        hidden = omitted["failures"] + max(0, len(failures) - MAX_FAILURES_SHOWN)
        by_level = dict(omitted.get("failures_by_level") or {})
        for t in failures[MAX_FAILURES_SHOWN:]:
            by_level[t["level"]] = by_level.get(t["level"], 0) + 1
        more = ""
        if hidden:
            more = f" (+{hidden} more: " + ", ".join(f"{n} {lv}" for lv, n in by_level.items()) + ")"
        span = d["span"]
        dated = span is not None and _date(span["first"]) != _date(span["last"])
        parts.append("Failures: " + "; ".join(_failure(t, dated) for t in failures[:MAX_FAILURES_SHOWN]) + more + ".")
    t = commonest(d)
    if t is not None:
        total = d["templates_total"]
        parts.append(f'Commonest: "{shown_pattern(t)}" ×{_count(t["count"])}'
                     + (f" of {_count(total)} templates." if total > 1 else "."))
    if d["entities"]:
        parts.append(_entities(d["entities"]) + ".")
    if d["outliers"]:
        parts.append(outlier_sentence(d["outliers"][0]))
    if not failures and not d["outliers"] and not d.get("pm"):
        parts.append("No failures or outliers found.")
    return " ".join(parts)


def outlier_sentence(o: dict) -> str:
    return f"Outlier: line {o['line']} {o['name']}={o['value']:g} (others {o['others_min']:g}–{o['others_max']:g})."
