"""`python -m bench.quality`: is the digest right? Measured on labelled logs, against Drain3 in the same process.

Two corpora:
- `--devlogs DIR` (default ../shared/devlogs when it exists): Loghub systems, each `<S>/<S>_2k.log` with
  its `_structured.csv` (per-line ground truth: EventId, EventTemplate, Level when the system has one)
  and, where present, Loghub-2.0's corrected templates. Not shipped with Ribbon (licence: the folder's README).
- the format corpus of worker/demo/samples.py (format_corpus: every format of worker/digest/formats.py, each
  line labelled with its level, template and the document's true span).

Per system: grouping accuracy (GA: a line is right when the set of lines its template groups is exactly
the set its true template groups) and parsing accuracy (PA: its template text equals the true one, both
with every placeholder written `<*>` and runs of them joined) of the templater and of Drain3 (default
configuration) on the same messages (the headers taken off by the format layer); level accuracy over
the lines with a true level; failure precision and recall (failure lines vs lines whose true level is
WARN or worse); span correctness (the digest's earliest and latest time equal the true ones, and never
inverted); summaries with control bytes; outliers inside their own quoted range; lines/s of the whole
analysis (format layer, templater, digest).

The standard template metrics (`loghub2`, `loghub2_total`: bench/loghub_bench.py): GA, PA, FGA and FTA
as logpai/loghub-2.0's evaluator computes them (bench/loghub_eval.py), of the templater and of Drain3
tuned as the benchmark tunes Drain (bench/drain_tuned.py), on each development system's Content lines.

- `--formats DIR` (default ../shared/formats when it exists): header detection per format on labelled real
  log lines (bench/headers.py), under the key `header_detection`; `--headers-only` measures that alone
  and rewrites only that key of --out.
- the labelled lines of formats outside that corpus (tests/digest/unseen_formats.jsonl, the set the grammar's classes
  were found on, and tests/digest/unseen_formats_check.jsonl, a second set measured before it was looked at),
  under `header_detection_unseen` (`found_on`, `check`), written with `header_detection` in both modes.

Usage: python -m bench.quality [--devlogs DIR] [--formats DIR] [--headers-only] [--out bench/results/quality_cpu.json]
       [--no-drain]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench import headers, loghub_bench
from bench.drain_tuned import drain3_miner
from worker.digest.clock import stamp_of
from worker.digest.compact import EXTRA_PREFIX, compact_text
from worker.digest.document import analyze_document
from worker.messages.levels import ORDER, WARN_RANK, level_word
from worker.digest.render import render
from worker.demo.samples import format_corpus

ROOT = Path(__file__).resolve().parents[1]  # the repository
DEFAULT_DEVLOGS = next((p for p in (ROOT.parent / "shared" / "devlogs", ROOT.parents[1] / "shared" / "devlogs")
                        if p.is_dir()), ROOT.parent / "shared" / "devlogs")
DEFAULT_OUT = ROOT / "bench" / "results" / "quality_cpu.json"
DEFAULT_FORMATS = next((p for p in (ROOT.parent / "shared" / "formats", ROOT.parents[1] / "shared" / "formats")
                        if p.is_dir()), ROOT.parent / "shared" / "formats")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PLACE = re.compile(r"<(?:n|hex|ip|uuid|ts|q|\*)>")
_RUNS = re.compile(r"(?:<\*>\s*){2,}")


def normalize(template: str) -> str:
    """A template with every placeholder `<*>`, runs of them one, whitespace single."""
    t = _PLACE.sub("<*>", template)
    t = _RUNS.sub("<*> ", t)
    return " ".join(t.split())


def grouping_accuracy(pred: list, truth: list) -> float:
    """GA: share of lines whose predicted group holds exactly the lines of their true group."""
    truth_size = Counter(truth)
    groups: dict = defaultdict(list)
    for i, p in enumerate(pred):
        groups[p].append(i)
    right = 0
    for members in groups.values():
        trues = {truth[i] for i in members}
        if len(trues) == 1 and truth_size[truth[members[0]]] == len(members):
            right += len(members)
    return right / max(1, len(truth))


def parsing_accuracy(pred_templates: list[str], true_templates: list[str]) -> float:
    return sum(normalize(p) == normalize(t) for p, t in zip(pred_templates, true_templates)) / max(1, len(true_templates))


def drain3_groups(messages: list[str]) -> tuple[list[int], list[str], float]:
    """Drain3 (default configuration) over the messages: (cluster per line, template per line, seconds)."""
    miner = drain3_miner()  # its default configuration
    t0 = time.process_time()
    ids = [miner.add_log_message(m)["cluster_id"] for m in messages]
    seconds = time.process_time() - t0
    by_id = {c.cluster_id: c.get_template() for c in miner.drain.clusters}
    return ids, [by_id[i] for i in ids], seconds


def _measure(text: str, lines: list[str], true_groups: list, true_templates: list[str] | None,
             true_levels: list[str | None] | None, true_span: tuple[str, str] | None, drain: bool,
             source: str) -> dict:
    t0 = time.process_time()
    a = analyze_document(text)
    seconds = time.process_time() - t0
    tm, d = a.templates, a.digest
    pred = tm.line_template.tolist()
    row = {"lines": len(lines), "format": d["format"], "templates": d["templates_total"],
           "true_templates": len(set(true_groups)), "ga": round(grouping_accuracy(pred, true_groups), 4),
           "lines_per_s": round(len(lines) / max(seconds, 1e-9))}
    patterns = [tm.templates[k].pattern if k >= 0 else "" for k in pred]
    if true_templates is not None:
        row["pa"] = round(parsing_accuracy(patterns, true_templates), 4)
    if drain:
        messages = a.read.texts if a.read is not None else lines
        ids, templates, dsec = drain3_groups(messages)
        row.update(drain3_ga=round(grouping_accuracy(ids, true_groups), 4),
                   drain3_templates=len(set(ids)), drain3_lines_per_s=round(len(lines) / max(dsec, 1e-9)))
        if true_templates is not None:
            row["drain3_pa"] = round(parsing_accuracy(templates, true_templates), 4)
    ranks = a.line_rank.tolist()
    if true_levels is not None:
        known = [(r, t) for r, t in zip(ranks, true_levels) if t is not None]
        if known:
            row["level_accuracy"] = round(sum(r >= 0 and ORDER[r] == t for r, t in known) / len(known), 4)
            fails = {i for f in a.failures for i in f["lines"].tolist()}
            truth = {i for i, t in enumerate(true_levels) if t is not None and ORDER.index(t) <= WARN_RANK}
            row.update(failure_lines=len(fails), true_failure_lines=len(truth),
                       failure_precision=round(len(fails & truth) / len(fails), 4) if fails else (1.0 if not truth else 0.0),
                       failure_recall=round(len(fails & truth) / len(truth), 4) if truth else 1.0)
    span = d["span"]
    row["span"] = [span["first"], span["last"]] if span else None
    row["span_inverted"] = bool(span and stamp_of(span["last"]) and stamp_of(span["first"])
                                and stamp_of(span["last"]).seconds < stamp_of(span["first"]).seconds)
    if true_span is not None:
        row["true_span"] = list(true_span)
        row["span_correct"] = bool(span and (span["first"], span["last"]) == tuple(true_span))
    summary = render(d, source, "log")
    row["summary_control_bytes"] = bool(_CONTROL.search(summary) or any(_CONTROL.search(h) for h in
                                                                          (f["example"] for f in d["failures"])))
    row["outliers_inside_range"] = sum(o["others_min"] <= o["value"] <= o["others_max"] for o in d["outliers"])
    row["summary"] = summary
    row["compaction"] = _compaction(a, text)
    return row


COMPACTION_CHOICES = (3, 10, 1 << 30)   # verbatim failure lines kept per template: as other templates, default, all


def _compaction(a, text: str) -> dict:
    """Characters of the compacted text and the failure lines it keeps verbatim, per FAILURE_EXTRA choice."""
    lines = a.templates.lines
    failing = [i for f in a.failures for i in f["lines"].tolist()]
    out = {"raw_chars": len(text), "failure_lines": len(failing)}
    for n in COMPACTION_CHOICES:
        c = compact_text(a, failure_extra=n)
        kept = set(c.split("\n"))
        verbatim = sum(lines[i].rstrip() in kept or (EXTRA_PREFIX + lines[i].strip()) in kept for i in failing)
        key = "all" if n > 1e6 else str(n)
        out[f"chars_{key}"] = len(c)
        out[f"failure_lines_verbatim_{key}"] = verbatim
    return out


def _devlog_truth(folder: Path, name: str) -> tuple[list[dict], dict[str, str]]:
    with open(folder / f"{name}_2k.log_structured.csv", encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    corrected = {}
    path = folder / f"{name}_2k.log_templates_corrected.csv"
    if path.exists():
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            corrected = {r["EventId"]: r["EventTemplate"] for r in csv.DictReader(f)}
    return rows, corrected


_TIME_FIELDS = (("Timestamp",), ("Month", "Date", "Time"), ("Month", "Day", "Time"), ("Date", "Day", "Time"),
                ("Date", "Time"), ("Time",))


def _true_span(rows: list[dict]) -> tuple[str, str] | None:
    """The earliest and latest time of the structured rows' own time fields, each parsed on its own."""
    stamps = []
    for fields in _TIME_FIELDS:
        if all(f in rows[0] for f in fields):
            for r in rows:
                text = " ".join(r[f] for f in fields)
                if fields == ("Date", "Time") and len(r["Date"]) == 6 and len(r["Time"]) == 6:
                    text = f"{r['Date']} {r['Time']}"
                s = stamp_of(text)
                if s is not None:
                    stamps.append(s)
            break
    if not stamps:
        return None
    lo = min(stamps, key=lambda s: s.seconds)
    hi = max(stamps, key=lambda s: s.seconds)
    return lo.text, hi.text


def devlogs(root: Path, drain: bool) -> dict:
    out = {}
    base = root / "loghub"
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        name = folder.name
        log = folder / f"{name}_2k.log"
        if not log.exists():
            continue
        text = log.read_text(encoding="utf-8", errors="replace").rstrip("\n")
        lines = text.split("\n")
        rows, corrected = _devlog_truth(folder, name)
        if len(rows) != len(lines):
            print(f"{name}: {len(lines)} lines but {len(rows)} labelled rows; skipped", file=sys.stderr)
            continue
        groups = [r["EventId"] for r in rows]
        templates = [corrected.get(r["EventId"], r["EventTemplate"]) for r in rows]
        levels = None
        if "Level" in rows[0] and name not in ("Linux",):      # Linux's "Level" column holds the host
            levels = [level_word(r["Level"]) for r in rows]
            if not any(levels):
                levels = None
        row = _measure(text, lines, groups, templates, levels, _true_span(rows), drain, name)
        row.pop("summary")      # it quotes the log: the licence keeps those lines out of the project
        if row.get("true_span") and row.get("span"):
            row["span_correct"] = row["span"] == row["true_span"]
        out[name] = row
    return out


def formats(drain: bool, n_lines: int) -> dict:
    out = {}
    for s in format_corpus(n_lines):
        lines = s.message["lines"]
        out[s.message["source"].split("/")[1]] = _measure("\n".join(lines), lines, list(s.templates), None,
                                                          list(s.levels), s.span, drain, s.message["source"])
    return out


def _mean(rows: dict, key: str) -> float | None:
    xs = [r[key] for r in rows.values() if key in r]
    return round(sum(xs) / len(xs), 4) if xs else None


def _totals(rows: dict) -> dict:
    return {"ga": _mean(rows, "ga"), "drain3_ga": _mean(rows, "drain3_ga"), "pa": _mean(rows, "pa"),
            "drain3_pa": _mean(rows, "drain3_pa"), "level_accuracy": _mean(rows, "level_accuracy"),
            "failure_precision": _mean(rows, "failure_precision"), "failure_recall": _mean(rows, "failure_recall"),
            "ga_below_drain3": sorted(k for k, r in rows.items() if "drain3_ga" in r and r["ga"] < r["drain3_ga"]),
            "span_correct": sum(bool(r.get("span_correct")) for r in rows.values()),
            "span_known": sum("span_correct" in r for r in rows.values()),
            "spans_inverted": sum(r["span_inverted"] for r in rows.values()),
            "summaries_with_control_bytes": sum(r["summary_control_bytes"] for r in rows.values()),
            "outliers_inside_range": sum(r["outliers_inside_range"] for r in rows.values()),
            "compaction": {k: sum(r["compaction"][k] for r in rows.values()) for k in next(iter(rows.values()))["compaction"]}}


def _table(title: str, rows: dict) -> None:
    print(f"\n{title}")
    print(f"{'system':14} {'GA':>6} {'Drain3':>6} {'PA':>6} {'Drain3':>6} {'level':>6} {'fail P':>6} {'fail R':>6} "
          f"{'span':>5} {'lines/s':>9}")
    for name, r in rows.items():
        def f(k):
            return f"{r[k]:6.3f}" if k in r else f"{'–':>6}"
        span = "–" if "span_correct" not in r else ("ok" if r["span_correct"] else "WRONG")
        print(f"{name:14} {f('ga')} {f('drain3_ga')} {f('pa')} {f('drain3_pa')} {f('level_accuracy')} "
              f"{f('failure_precision')} {f('failure_recall')} {span:>5} {r['lines_per_s']:9,}")


HEADERS_KEY = "header_detection"
UNSEEN_KEY = "header_detection_unseen"
UNSEEN = {"found_on": Path("tests/digest/unseen_formats.jsonl"), "check": Path("tests/digest/unseen_formats_check.jsonl")}


def _unseen() -> dict:
    """Header detection on the labelled files of formats outside the development corpus (the module docstring)."""
    root = Path(__file__).resolve().parent.parent
    out = {}
    for name, rel in UNSEEN.items():
        out[name] = headers.measure(root / rel)
        headers.table(out[name])
    return out


def _headers_only(corpus: Path, out: Path) -> int:
    """Header detection alone, written under HEADERS_KEY of `out` (the file's other keys kept as they are)."""
    if not (corpus / "formats.jsonl").is_file():
        print(f"python -m bench.quality: no formats.jsonl in {corpus} (--formats)", file=sys.stderr)
        return 2
    res = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    res[HEADERS_KEY] = headers.measure(corpus)
    headers.table(res[HEADERS_KEY])
    res[UNSEEN_KEY] = _unseen()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {HEADERS_KEY} and {UNSEEN_KEY} into {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.split("\n")[0])
    ap.add_argument("--devlogs", type=Path, default=DEFAULT_DEVLOGS,
                    help="a folder with loghub/<System>/<System>_2k.log* (skipped when missing)")
    ap.add_argument("--lines", type=int, default=2000, help="lines per document of the format corpus")
    ap.add_argument("--no-drain", action="store_true", help="skip Drain3 (the bench extra)")
    ap.add_argument("--formats", type=Path, default=DEFAULT_FORMATS,
                    help="a folder with formats.jsonl (labelled real log formats; skipped when missing)")
    ap.add_argument("--headers-only", action="store_true",
                    help="measure header detection only and write it under its key of --out, keeping the rest")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.headers_only:
        return _headers_only(args.formats, args.out)
    drain = not args.no_drain
    if drain:
        try:
            import drain3  # noqa: F401, PLC0415 probe of an optional dependency (the [bench] extra)
        except ImportError:
            print("python -m bench.quality: drain3 is not installed (pip install -e '.[bench]'), or pass --no-drain",
                  file=sys.stderr)
            return 2
    res = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg(), "python": platform.python_version(), "clock": "process CPU time"}
    if (args.devlogs / "loghub").is_dir():
        res["devlogs"] = devlogs(args.devlogs, drain)
        res["devlogs_total"] = _totals(res["devlogs"])
        _table(f"development logs ({args.devlogs})", res["devlogs"])
        res["loghub2"] = loghub_bench.loghub2(args.devlogs, drain)
        res["loghub2_total"] = loghub_bench.totals(res["loghub2"])
        loghub_bench.table(res["loghub2"])
    else:
        print(f"no development logs at {args.devlogs}: the format corpus only", file=sys.stderr)
    if (args.formats / "formats.jsonl").is_file():
        res[HEADERS_KEY] = headers.measure(args.formats)
        headers.table(res[HEADERS_KEY])
    res[UNSEEN_KEY] = _unseen()
    res["formats"] = formats(drain, args.lines)
    res["formats_total"] = _totals(res["formats"])
    _table("format corpus (worker/demo/samples.py)", res["formats"])
    for key in ("devlogs_total", "loghub2_total", "formats_total"):
        if key in res:
            print(f"{key}: " + ", ".join(f"{k}={v}" for k, v in res[key].items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
