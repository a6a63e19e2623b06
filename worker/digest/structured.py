"""Structured documents: 3GPP PM XML files and OTLP/JSON logs, read for what they are.

    pm_digest(text)  -> the `pm` object of the digest for a TS 32.435 `measCollecFile` or TS 28.532
                        `measDataFile`, or None when the text is neither
    otlp_lines(text) -> the log records of an OTLP/JSON `resourceLogs` export as lines
                        (`<time> <LEVEL> [<service>] <body> key=value ...`, worker/messages/otlp.py),
                        or None

A PM file's counters are read by position (`measTypes` + `measResults`, or `measType p=` + `r p=`),
per measured object (`measObjLdn`). The digest names the managed element, the period and granularity,
how many objects and cells, the non-zero counters (largest total first), the failure-type counters
(`*Fail*`, `*Drop*`, `*Rej*`, `*Abnorm*`, `*Loss*`) with the object of their largest value, and the
objects far from the others on a counter (robust z, as outliers.py), and how many counters are non-zero
(`nonzero_total`; the list holds the first MAX_COUNTERS). The period is `beginTime` (or 32.435's
`collectionBeginTime`) to `endTime` (pm_span: the digest's span). Processing instructions and comments
before the XML declaration are read as the prolog they are. XML with a DOCTYPE or entity
declarations is not parsed (no entity expansion). The values are read in bulk by pm_scan.py (the
file's structure by xml.etree without its measValue lists); a list of another shape makes the file
go through xml.etree whole, element by element (_from_elements). Both give the same table of values.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import orjson

from worker.digest import pm_scan
from worker.digest.timeparse import stamp_of
from worker.digest.outliers import Z_OUTLIER, far_outside
from worker.messages.otlp import InvalidExport, read_export

MAX_COUNTERS = 10
MAX_EXTREMES = 5
FAILURE_COUNTER = re.compile(r"fail|drop|rej|abnorm|loss|err(?:or)?s?(?:[A-Z_.]|$)|release_?abn", re.I)
_CELL = re.compile(r"cell", re.I)
# processing instructions (xml-stylesheet) and comments before the XML declaration: the declaration goes,
# so the parser reads them as the prolog they are
_PROLOG = re.compile(r"^(\s*(?:<\?(?!xml\s)[^?]*(?:\?(?!>)[^?]*)*\?>\s*|<!--(?:(?!-->).)*-->\s*)+)<\?xml\s[^?]*\?>",
                     re.S)
_DURATION = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?$")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _seconds(duration: str | None) -> int | None:
    m = _DURATION.match(duration or "")
    if not m:
        return None
    h, mi, s = (int(x or 0) for x in m.groups())
    return h * 3600 + mi * 60 + s


@dataclass(frozen=True)
class _Table:
    """A file's counter values as columns, in file order."""
    counters: list[str]       # [C] counter names
    cid: np.ndarray           # [N] int64 each value's counter
    oid: np.ndarray           # [N] int64 each value's object
    objects: list[str]        # [O] object names (measObjLdn)
    x: np.ndarray             # [N] float64 the values
    suspect: int              # measValues marked suspect


def pm_digest(text: str) -> dict | None:
    """The `pm` object of a PM XML file (the module docstring), or None when the text is none or does not parse."""
    head = text[:4096]
    if "measCollecFile" not in head and "measDataFile" not in head:
        return None
    if "<!DOCTYPE" in head or "<!ENTITY" in text:
        return None
    text = _PROLOG.sub(r"\1", text, count=1)
    sk = pm_scan.skeleton(text)
    cols = [pm_scan.scan(r) if r else None for r in sk.regions] if sk is not None else []
    bulk = bool(cols) and all(c is not None for r, c in zip(sk.regions, cols) if r) and any(sk.regions)
    root = _parse(sk.text if bulk else text)
    if root is None:
        return None
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    infos = list(root.iter(f"{ns}measInfo"))
    if bulk and len(infos) != len(cols):     # a measInfo the skeleton cut differently: parse the file whole
        bulk, root = False, _parse(text)
        if root is None:
            return None
        infos = list(root.iter(f"{ns}measInfo"))
    info = _file_info(root, ns)
    for mi in infos:
        gp = mi.find(f"{ns}granPeriod")
        if gp is not None:
            info["granularity_s"] = info["granularity_s"] or _seconds(gp.get("duration"))
            info["end"] = info["end"] or gp.get("endTime")
    table = _from_columns(cols, [_names(mi, ns) for mi in infos]) if bulk else _from_elements(infos, ns)
    return {**info, "suspect": table.suspect, **_counter_digest(table)}


def _parse(text: str) -> ET.Element | None:
    """The XML's root element, or None where it does not parse; a lone surrogate (text cut inside a character)
    is read as `?`."""
    try:
        return ET.fromstring(text.strip().encode("utf-8", "replace"))
    except ET.ParseError:
        return None


def _file_info(root, ns: str) -> dict:
    standard = "28.532" if _local(root.tag) == "measDataFile" else "32.435"
    info = {"standard": standard, "managed_element": None, "sender": None, "begin": None, "end": None,
            "granularity_s": None}
    for tag in ("managedElement", "measEntity"):
        el = root.find(f".//{ns}{tag}")
        if el is not None and info["managed_element"] is None:
            info["managed_element"] = el.get("localDn") or el.get("userLabel")
    el = root.find(f".//{ns}fileSender")
    if el is not None:
        info["sender"] = el.get("localDn") or el.get("senderName")
    for tag in ("fileHeader", "measCollec", "measData", "fileFooter"):   # 28.532 / 32.435: beginTime, endTime;
        for el in root.iter(f"{ns}{tag}"):                               # 32.435 headers: collectionBeginTime
            begin = el.get("beginTime") or el.get("collectionBeginTime")
            if begin and info["begin"] is None:
                info["begin"] = begin
            if el.get("endTime"):
                info["end"] = el.get("endTime")
    return info


def pm_span(pm: dict) -> dict | None:
    """The digest's span of a PM file: its begin and end (UTC when they carry a zone), or None without both."""
    first, last = stamp_of(pm["begin"] or ""), stamp_of(pm["end"] or "")
    if first is None or last is None:
        return None
    if last.seconds < first.seconds:
        first, last = last, first
    zoned = any(z in (pm["begin"] or "")[10:] for z in ("Z", "+", "-"))
    return {"first": first.text, "last": last.text, "form": first.form,
            "seconds": round(last.seconds - first.seconds, 3), "zone": "UTC" if zoned else None,
            "out_of_order": 0, "first_line": None, "last_line": None}


def _names(el, ns: str) -> dict[str, str]:
    """A measInfo's counter names by position (`measTypes` or `measType p=`)."""
    names: dict[str, str] = {}
    types = el.find(f"{ns}measTypes")
    if types is not None:
        names.update({str(i + 1): n for i, n in enumerate((types.text or "").split())})
    for mt in el.iterfind(f"{ns}measType"):
        names[mt.get("p", str(len(names) + 1))] = (mt.text or "").strip()
    return names


def _from_columns(cols: list, names: list[dict[str, str]]) -> _Table:
    """The table of the bulk reader's columns (pm_scan.scan, one per measInfo; None where it has no values)."""
    counters: dict[str, int] = {}
    objects: dict[str, int] = {}
    cids, oids, xs, suspect = [], [], [], 0
    for c, nm in zip(cols, names):
        if c is None:
            continue
        suspect += c.suspect
        for o in dict.fromkeys(c.objects):
            objects.setdefault(o, len(objects))
        oid = np.fromiter(map(objects.__getitem__, c.objects), np.int64, len(c.objects))           # [M]
        keep = ~np.isnan(c.x)                                                                       # [N]
        used, inv = _distinct(c.p[keep])
        texts = [c.positions[i] for i in used.tolist()]
        lookup = np.array([counters.setdefault(nm.get(p) or f"p{p}", len(counters)) for p in texts],
                          dtype=np.int64)                                                           # [P]
        cids.append(lookup[inv])
        oids.append(oid[c.mv[keep]])
        xs.append(c.x[keep])
    cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
    return _Table(list(counters), cat(cids, np.int64), cat(oids, np.int64), list(objects), cat(xs, np.float64),
                  suspect)


def _from_elements(infos: list, ns: str) -> _Table:
    """The table of a file parsed whole by xml.etree (the shapes pm_scan leaves: see its docstring)."""
    counters: dict[str, int] = {}
    objects: dict[str, int] = {}
    cid, oid, xs, suspect = [], [], [], 0
    r_tag, results_tag, suspect_tag = f"{ns}r", f"{ns}measResults", f"{ns}suspect"
    for el in infos:
        names = _names(el, ns)
        for mv in el.iterfind(f"{ns}measValue"):
            obj = mv.get("measObjLdn", "")
            for child in mv:
                tag = child.tag
                if tag == r_tag:
                    p = child.get("p", "")
                    pairs = [(names.get(p) or f"p{p}", child.text)]
                elif tag == results_tag:
                    pairs = [(names.get(str(i + 1)) or f"p{i + 1}", v) for i, v in enumerate((child.text or "").split())]
                else:
                    suspect += tag == suspect_tag and (child.text or "").strip().lower() == "true"
                    continue
                for name, v in pairs:
                    x = _number(v)
                    if x is not None:
                        cid.append(counters.setdefault(name, len(counters)))
                        oid.append(objects.setdefault(obj, len(objects)))
                        xs.append(x)
    return _Table(list(counters), np.array(cid, dtype=np.int64), np.array(oid, dtype=np.int64), list(objects),
                  np.array(xs, dtype=np.float64), suspect)


def _number(text: str | None) -> float | None:
    try:
        x = float(text)                                     # type: ignore[arg-type]
    except (TypeError, ValueError):                         # None, "", NIL: no value
        return None
    return x if x == x else None                            # a "nan" counts as none


def _counter_digest(t: _Table) -> dict:
    order = np.argsort(t.cid, kind="stable")                                  # [N] by counter, file order within
    bounds = np.searchsorted(t.cid[order], np.arange(len(t.counters) + 1))    # [C+1]
    stats, extremes = [], []
    for c, name in enumerate(t.counters):
        sel = order[bounds[c]:bounds[c + 1]]
        xs, objs = t.x[sel], t.oid[sel]                                       # [n], [n]
        stats.append(_stat(name, xs, objs, t.objects))
        extremes += _extremes(name, xs, objs, t.objects)
    seen = [t.objects[i] for i in _distinct(t.oid)[0].tolist()]
    nonzero = sorted((s for s in stats if s["total"] != 0), key=lambda s: (-abs(s["total"]), s["name"]))
    failing = [s for s in nonzero if FAILURE_COUNTER.search(s["name"])]
    extremes.sort(key=lambda e: (-e["z"], e["counter"], e["object"]))
    return {"objects": len(seen), "cells": sum(bool(_CELL.search(o)) for o in seen), "counters": len(t.counters),
            "nonzero": nonzero[:MAX_COUNTERS], "nonzero_total": len(nonzero), "failure_counters": failing[:MAX_COUNTERS],
            "extremes": extremes[:MAX_EXTREMES]}


def _stat(name: str, xs: np.ndarray, objs: np.ndarray, objects: list[str]) -> dict:
    j = int(np.argmax(xs))
    return {"name": name, "total": float(xs.sum()), "objects": int((xs != 0).sum()), "max": float(xs[j]),
            "max_object": objects[int(objs[j])], "median": _median(xs)}


# np.unique and np.median import numpy.ma on their first call (12-25 ms of the first PM file a process reads):
# their answers here are made without them
def _distinct(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(ids, return_inverse=True) of non-negative ids: the distinct ids ascending and each id's index
    among them, counted instead of sorted."""
    present = np.bincount(ids) > 0                     # [max id + 1]
    return np.flatnonzero(present), (np.cumsum(present) - 1)[ids]


def _median(xs: np.ndarray) -> float:
    """float(np.median(xs)) of a non-empty float array, as np.median takes it: the np.mean of the middle value
    or the middle two, NaN where a value is NaN."""
    n = len(xs)
    if np.isnan(xs).any():
        return float("nan")
    lo = (n - 1) // 2
    return float(np.mean(np.partition(xs, [lo, n // 2])[lo:n // 2 + 1]))


def _extremes(name: str, xs: np.ndarray, objs: np.ndarray, objects: list[str]) -> list[dict]:
    if len(xs) < 5:
        return []
    med = _median(xs)
    dev = np.abs(xs - med)
    mad = _median(dev)
    scale = 1.4826 * mad if mad > 0 else 1.2533 * float(dev.mean())
    if scale <= 0:
        return []
    z = dev / scale
    inl = xs[z < Z_OUTLIER]
    if not len(inl):
        return []
    lo, hi = float(inl.min()), float(inl.max())
    return [{"counter": name, "object": objects[int(objs[j])], "value": float(xs[j]), "median": med,
             "z": round(float(z[j]), 1)}
            for j in np.flatnonzero(z >= Z_OUTLIER).tolist() if far_outside(float(xs[j]), lo, hi)]


# ---- OTLP/JSON logs --------------------------------------------------------------------------------------

def otlp_lines(text: str) -> list[str] | None:
    """The records of an OTLP/JSON logs export as lines (worker/messages/otlp.py), or None when the text is
    not one."""
    head = text.lstrip()[:200]
    if not head.startswith("{") or "resourceLogs" not in text[:2000]:
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceLogs"), list):
        return None
    try:
        return read_export(obj).lines
    except InvalidExport:
        return None
