"""The documents of bench/summaries.py, each with the fault lines it is labelled with.

- labelled: every quality kind of worker/demo/samples.py (`labelled`), two injected fault lines each;
- synthetic: every kind of the demo's generator (`document`: trace, syslog, log, crash, pm), its
  injected fault (the ERROR line, the crash line, the PM row of the low cell);
- devlogs: loghub systems (/work/shared/devlogs), two windows of --devlog-lines lines each: the
  first lines, and the lines around the first line loghub's parse labels with an error level; the
  fault is that line (none for a system whose parse has no level);
- formats: real format lines (/work/shared/formats), the records of one format as a document; the
  fault is the first record whose asserted level is an error level.
Benchmark only: the development folders are read here and never copied into the project.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

from worker.demo.samples import QUALITY_KINDS, document, labelled

DEVLOGS = Path("/work/shared/devlogs/loghub")
FORMATS = Path("/work/shared/formats/formats.jsonl")
ERROR_LEVELS = frozenset("e error err severe fatal f crit critical alert emerg emergency".split())


def _doc(id_: str, lines: list[str], source: str, kind: str, faults: list[str], set_: str) -> dict:
    return {"id": id_, "text": "\n".join(lines), "source": source, "kind": kind, "faults": faults, "set": set_}


def synthetic(per_kind: int, lines: int) -> list[dict]:
    docs = []
    for kind in QUALITY_KINDS:
        for i in range(per_kind):
            s = labelled(kind, i, lines, seed=7)
            docs.append(_doc(s.message["id"], s.message["lines"], s.message["source"], kind, list(s.faults),
                             "labelled"))
    for i in range(5 * per_kind):  # document(i) cycles through its five kinds
        m = document(i, n_lines=min(lines, 40), seed=7)
        fault = [ln for ln in m["lines"] if " ERROR " in ln or " crash: " in ln or "dl_thp_mbps=3.1" in ln][:1]
        docs.append(_doc(m["id"], m["lines"], m["source"], m["kind"], fault, "synthetic"))
    return docs


def devlogs(lines: int, systems: int) -> list[dict]:
    if not lines or not DEVLOGS.is_dir():
        return []
    docs = []
    for system in sorted(p.name for p in DEVLOGS.iterdir() if p.is_dir())[:systems]:
        raw = (DEVLOGS / system / f"{system}_2k.log").read_text(errors="replace").splitlines()
        with open(DEVLOGS / system / f"{system}_2k.log_structured.csv", newline="", errors="replace") as f:
            levels = [(r.get("Level") or "").strip().lower() for r in csv.DictReader(f)]
        first_error = next((i for i, lv in enumerate(levels) if lv in ERROR_LEVELS), None)
        starts = [0] + ([max(0, first_error - lines // 3)] if first_error is not None else [len(raw) // 2])
        for k, a in enumerate(starts):
            window = raw[a:a + lines]
            faults = [raw[i] for i in range(a, min(a + lines, len(raw))) if levels[i] in ERROR_LEVELS][:1] \
                if len(levels) == len(raw) else []
            docs.append(_doc(f"loghub-{system}-{k}", window, system, "log", faults, "devlogs"))
    return docs


def formats(n: int) -> list[dict]:
    if not n or not FORMATS.is_file():
        return []
    by_format: dict[str, list[dict]] = defaultdict(list)
    for line in FORMATS.read_text().splitlines():
        r = json.loads(line)
        by_format[r["format"]].append(r)
    docs = []
    for fmt, records in sorted(by_format.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:n]:
        faults = [r["line"] for r in records
                  if str({**(r.get("expect") or {}), **(r.get("normalized") or {})}.get("level", "")).lower()
                  in ERROR_LEVELS][:1]
        docs.append(_doc(f"format-{fmt}", [r["line"] for r in records], fmt, "log", faults, "formats"))
    return docs


def corpus(per_kind: int, lines: int, devlog_lines: int, devlog_systems: int, n_formats: int) -> list[dict]:
    return synthetic(per_kind, lines) + devlogs(devlog_lines, devlog_systems) + formats(n_formats)
