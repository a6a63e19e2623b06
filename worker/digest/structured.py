"""Structured documents: 3GPP PM XML files and OTLP/JSON logs, read for what they are.

    pm_digest(text)  -> the `pm` object of the digest for a TS 32.435 `measCollecFile` or TS 28.532
                        `measDataFile`, or None when the text is neither
    otlp_lines(text) -> the log records of an OTLP/JSON `resourceLogs` export as lines
                        (`<time> <LEVEL> [<service>] <body> key=value ...`), or None

A PM file's counters are read by position (`measTypes` + `measResults`, or `measType p=` + `r p=`),
per measured object (`measObjLdn`). The digest names the managed element, the period and granularity,
how many objects and cells, the non-zero counters (largest total first), the failure-type counters
(`*Fail*`, `*Drop*`, `*Rej*`, `*Abnorm*`, `*Loss*`) with the object of their largest value, and the
objects far from the others on a counter (robust z, as outliers.py). XML with a DOCTYPE or entity
declarations is not parsed (no entity expansion).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import numpy as np
import orjson

from worker.digest.levels_table import from_otlp, level_word
from worker.digest.outliers import Z_OUTLIER, far_outside

MAX_COUNTERS = 10
MAX_EXTREMES = 5
FAILURE_COUNTER = re.compile(r"fail|drop|rej|abnorm|loss|err(?:or)?s?(?:[A-Z_.]|$)|release_?abn", re.I)
_CELL = re.compile(r"cell", re.I)
_DURATION = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?$")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _seconds(duration: str | None) -> int | None:
    m = _DURATION.match(duration or "")
    if not m:
        return None
    h, mi, s = (int(x or 0) for x in m.groups())
    return h * 3600 + mi * 60 + s


def pm_digest(text: str) -> dict | None:
    head = text[:4096]
    if "measCollecFile" not in head and "measDataFile" not in head:
        return None
    if "<!DOCTYPE" in head or "<!ENTITY" in text:
        return None
    try:
        root = ET.fromstring(text.strip().encode("utf-8"))
    except ET.ParseError:
        return None
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    standard = "28.532" if _local(root.tag) == "measDataFile" else "32.435"
    info = {"standard": standard, "managed_element": None, "sender": None, "begin": None, "end": None,
            "granularity_s": None, "suspect": 0}
    for tag in ("managedElement", "measEntity"):
        el = root.find(f".//{ns}{tag}")
        if el is not None and info["managed_element"] is None:
            info["managed_element"] = el.get("localDn") or el.get("userLabel")
    el = root.find(f".//{ns}fileSender")
    if el is not None:
        info["sender"] = el.get("localDn") or el.get("senderName")
    for el in root.iter(f"{ns}measCollec"):
        if el.get("beginTime") and info["begin"] is None:
            info["begin"] = el.get("beginTime")
        if el.get("endTime"):
            info["end"] = el.get("endTime")
    values: dict[str, list[tuple[str, float]]] = {}
    for mi in root.iter(f"{ns}measInfo"):
        gp = mi.find(f"{ns}granPeriod")
        if gp is not None:
            info["granularity_s"] = info["granularity_s"] or _seconds(gp.get("duration"))
            info["end"] = info["end"] or gp.get("endTime")
        _read_meas_info(mi, ns, values, info)
    objects = {obj for rows in values.values() for obj, _ in rows}
    stats = [_stat(name, rows) for name, rows in values.items()]
    nonzero = sorted((s for s in stats if s["total"] != 0), key=lambda s: (-abs(s["total"]), s["name"]))
    failing = [s for s in nonzero if FAILURE_COUNTER.search(s["name"])]
    return {**info, "objects": len(objects), "cells": sum(bool(_CELL.search(o)) for o in objects),
            "counters": len(values), "nonzero": nonzero[:MAX_COUNTERS], "failure_counters": failing[:MAX_COUNTERS],
            "extremes": _extremes(values)}


def _read_meas_info(el, ns: str, values: dict, info: dict) -> None:
    names: dict[str, str] = {}
    types = el.find(f"{ns}measTypes")
    if types is not None:
        names.update({str(i + 1): n for i, n in enumerate((types.text or "").split())})
    for mt in el.iterfind(f"{ns}measType"):
        names[mt.get("p", str(len(names) + 1))] = (mt.text or "").strip()
    r_tag, results_tag, suspect_tag = f"{ns}r", f"{ns}measResults", f"{ns}suspect"
    for mv in el.iterfind(f"{ns}measValue"):      # one pass over each value's children, no path lookups
        obj = mv.get("measObjLdn", "")
        for child in mv:
            tag = child.tag
            if tag == r_tag:
                p = child.get("p", "")
                _add(values, names.get(p) or f"p{p}", obj, child.text)
            elif tag == results_tag:
                for i, v in enumerate((child.text or "").split()):
                    _add(values, names.get(str(i + 1)) or f"p{i + 1}", obj, v)
            elif tag == suspect_tag and (child.text or "").strip().lower() == "true":
                info["suspect"] += 1


def _add(values: dict, name: str, obj: str, text: str | None) -> None:
    try:
        x = float(text)                                     # type: ignore[arg-type]
    except (TypeError, ValueError):                         # None, "", NIL: no value
        return
    if x == x:                                              # a "nan" counts as none
        rows = values.get(name)
        if rows is None:
            values[name] = rows = []
        rows.append((obj, x))


def _stat(name: str, rows: list[tuple[str, float]]) -> dict:
    xs = np.array([x for _, x in rows])                                     # [N]
    j = int(np.argmax(xs))
    return {"name": name, "total": float(xs.sum()), "objects": int((xs != 0).sum()), "max": float(xs[j]),
            "max_object": rows[j][0], "median": float(np.median(xs))}


def _extremes(values: dict) -> list[dict]:
    out = []
    for name, rows in values.items():
        if len(rows) < 5:
            continue
        xs = np.array([x for _, x in rows])                                 # [N]
        med = float(np.median(xs))
        dev = np.abs(xs - med)
        mad = float(np.median(dev))
        scale = 1.4826 * mad if mad > 0 else 1.2533 * float(dev.mean())
        if scale <= 0:
            continue
        z = dev / scale
        inl = xs[z < Z_OUTLIER]
        if not len(inl):
            continue
        lo, hi = float(inl.min()), float(inl.max())
        for j in np.flatnonzero(z >= Z_OUTLIER).tolist():
            if far_outside(float(xs[j]), lo, hi):
                out.append({"counter": name, "object": rows[j][0], "value": float(xs[j]), "median": med,
                            "z": round(float(z[j]), 1)})
    out.sort(key=lambda e: (-e["z"], e["counter"], e["object"]))
    return out[:MAX_EXTREMES]


# ---- OTLP/JSON logs --------------------------------------------------------------------------------------

def _any_value(v) -> str:
    if not isinstance(v, dict):
        return "" if v is None else str(v)
    for k in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if k in v:
            return str(v[k])
    if "arrayValue" in v:
        return ",".join(_any_value(x) for x in v["arrayValue"].get("values", []))
    if "kvlistValue" in v:
        return ",".join(f"{kv.get('key')}={_any_value(kv.get('value'))}" for kv in v["kvlistValue"].get("values", []))
    return ""


def _attrs(items) -> dict[str, str]:
    return {a.get("key", ""): _any_value(a.get("value")) for a in items or () if isinstance(a, dict)}


def _time(record: dict) -> str:
    nanos = record.get("timeUnixNano") or record.get("observedTimeUnixNano")
    try:
        ns = int(nanos)
    except (TypeError, ValueError):
        return "-"
    if ns <= 0:
        return "-"
    dt = datetime.fromtimestamp(ns // 1000 / 1e6, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def otlp_lines(text: str) -> list[str] | None:
    """The records of an OTLP/JSON logs export as lines, or None when the text is not one."""
    head = text.lstrip()[:200]
    if not head.startswith("{") or "resourceLogs" not in text[:2000]:
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceLogs"), list):
        return None
    out = []
    for rl in obj["resourceLogs"]:
        res = _attrs((rl.get("resource") or {}).get("attributes"))
        service = res.get("service.name") or res.get("host.name") or "-"
        for sl in rl.get("scopeLogs") or rl.get("instrumentationLibraryLogs") or ():
            for rec in sl.get("logRecords") or ():
                level = level_word(str(rec.get("severityText") or "")) or from_otlp(int(rec.get("severityNumber") or 0))
                attrs = _attrs(rec.get("attributes"))
                extra = " ".join(f"{k}={v}" for k, v in attrs.items())
                body = _any_value(rec.get("body")).replace("\n", " ")
                out.append(f"{_time(rec)} {level or 'UNSET'} [{service}] {body}" + (f" {extra}" if extra else ""))
    return out
