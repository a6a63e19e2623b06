"""A PM XML file's counter values in bulk: a few C-speed passes per `measInfo`, no element per value.

    skeleton(text)            -> Skeleton | None: the file without its measValue elements (for
                                 xml.etree, small) and, per measInfo, the text of its measValues
    scan(region)              -> Columns | None: that text's values as arrays

A 15-minute file of a large node holds 10^5-10^6 values; xml.etree builds an element per value and
then Python reads each one (structured.py's fallback). Why no XML parser here: on the benchmark's
20,000-line file (60,000 values) xml.etree's C parse alone costs about twice this whole read, before
Python has looked at one value, and lxml (not a dependency) would still hand Python an object per
element read. Here the file's structure (the
header, measInfo, granPeriod, measTypes, measType) is still parsed by xml.etree, from the skeleton,
and only the measValue lists, whose shape TS 32.435 and TS 28.532 fix
(`<measValue measObjLdn="..."><r p="1">v</r>...` or `<measResults>v v v</measResults>`, then
`<suspect>`), are read by regular expressions and numpy. Every measValue, `r` and `measResults` start
tag of a region must be read, and every tag in it must be one of those (or `suspect`) with its end
tag, or the region is not scanned: a shape outside that (other attributes or quotes, namespace
prefixes, comments, CDATA, entity references, self-closing elements, both `r` and `measResults` in
one measInfo, or neither) gets None and the caller parses the file whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_MEAS_INFO = re.compile(r"<measInfo[\s>]")
_OBJ = re.compile(r'<measValue\s+measObjLdn\s*=\s*"([^"\t\r\n]*)"\s*>')   # xml.etree makes \t\r\n spaces
_MARKS = re.compile(r'<(?:measValue[\s>]|r\s+p\s*=\s*"(\d+)"\s*>)')   # "" for a measValue, p for an r
_R_VALUE = re.compile(r"<r\s[^>]*>([^<]*)</r\s*>")
_MV_RESULTS = re.compile(_OBJ.pattern + r"\s*<measResults\s*>([^<]*)</measResults\s*>")
_SUSPECT = re.compile(r"<suspect\s*>\s*(?i:true)\s*</suspect\s*>")
_END = re.compile(r"</measValue\s*>")


@dataclass(frozen=True)
class Skeleton:
    text: str                 # the file with each measInfo's measValue elements cut out
    regions: list[str]        # [I] per measInfo in file order: the text of its measValue elements ("" none)


@dataclass(frozen=True)
class Columns:
    p: np.ndarray             # [N] int64 each value's position: an index into positions
    positions: list[str]      # [P] the position texts (`r p=`, or the index in measResults from 1)
    mv: np.ndarray            # [N] int64 each value's measValue (index into the region's objects)
    x: np.ndarray             # [N] float64 each value (NaN: none, like an empty or NIL `r`)
    objects: list[str]        # [M] each measValue's measObjLdn
    suspect: int              # measValues marked suspect


def skeleton(text: str) -> Skeleton | None:
    """The file split into its skeleton and measValue regions, or None when a measInfo's measValues are
    not all found (no end tag, a namespace prefix)."""
    starts = [m.start() for m in _MEAS_INFO.finditer(text)] + [len(text)]
    kept, regions = [text[:starts[0]]], []
    for a, b in zip(starts, starts[1:]):
        block = text[a:b]
        i = block.find("<measValue")
        if i < 0:
            if "measValue" in block:          # under a namespace prefix: not read here
                return None
            kept.append(block)
            regions.append("")
            continue
        end = _END.match(block, max(0, block.rfind("</measValue")))
        if end is None:
            return None
        kept += [block[:i], block[end.end():]]
        regions.append(block[i:end.end()])
    return Skeleton("".join(kept), regions)


def _floats(texts: list[str]) -> np.ndarray:
    """[N] float64 of number texts; one that is no number (NIL, empty) or NaN is NaN (no value)."""
    try:
        return np.fromiter(map(float, texts), np.float64, len(texts))     # [N]
    except ValueError:
        return np.array([_float(t) for t in texts], dtype=np.float64)


def _float(t: str) -> float:
    try:
        return float(t)
    except ValueError:
        return float("nan")


def scan(region: str) -> Columns | None:
    """The values of one measInfo's measValue elements (Skeleton.regions), or None (see the module)."""
    objects = _OBJ.findall(region)
    n_mv, n_r, n_res = len(objects), region.count("<r"), region.count("<measResults")
    n_suspect = region.count("<suspect")
    # every tag is one of those, each with its end tag: no comment, CDATA, PI, prefix or other element
    if region.count("<") != 2 * (n_mv + n_r + n_res + n_suspect) or "&" in region:
        return None
    if n_mv != region.count("</measValue") or bool(n_r) == bool(n_res):
        return None
    if n_r:
        marks = _MARKS.findall(region)                   # [M + N] in file order: "" a measValue, else an r's p
        texts = _R_VALUE.findall(region)
        if len(marks) != n_mv + n_r or len(texts) != n_r:
            return None
        positions = sorted(set(marks) - {""}, key=int)
        code = dict(zip(positions, range(len(positions))))
        code[""] = -1
        mark = np.fromiter(map(code.__getitem__, marks), np.int64, len(marks))      # [M + N]
        is_r = mark >= 0
        mv = (np.cumsum(~is_r) - 1)[is_r]                                           # [N]
        p = mark[is_r]                                                              # [N]
    else:
        pairs = _MV_RESULTS.findall(region)               # each measValue with its measResults, first
        if len(pairs) != n_mv or n_res != n_mv:
            return None
        results = [r for _, r in pairs]
        counts = np.fromiter(map(len, map(str.split, results)), np.int64, n_mv)       # [M]
        texts = " ".join(results).split()
        first = np.repeat(np.cumsum(counts) - counts, counts)                          # [N]
        p = np.arange(len(texts), dtype=np.int64) - first                              # [N] 0-based
        positions = [str(i + 1) for i in range(int(counts.max(initial=0)))]
        mv = np.repeat(np.arange(n_mv, dtype=np.int64), counts)                        # [N]
    suspect = len(_SUSPECT.findall(region)) if n_suspect else 0
    return Columns(p, positions, mv, _floats(texts), objects, suspect)
