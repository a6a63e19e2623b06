"""The Loghub-2.0 template benchmark of `python -m bench.quality`: Ribbon's templater and tuned Drain3 side by side.

Per development system (`<S>_2k.log_structured.csv`: each line's Content and its true template, Loghub-2.0's
corrected one where the folder has it), both parsers get the same Content lines, as the benchmark gives
every parser its log format's Content field. Ribbon's templates are written in the benchmark's form
(loghub_form: each placeholder <n> <hex> <ip> <uuid> <ts> <q> <*> as `<*>`); in both parsers' templates a
run of variables separated by whitespace is one `<*>` (join_runs), and loghub_eval.metrics scores them as
the evaluator does. `post_processed` scores the same templates after the parser-side normalization of
the benchmark's tooling (loghub_eval.post_process), for both parsers alike. lines/s: process CPU time of
the parse alone (Ribbon: one templater call over the document; Drain3: its add_log_message loop).
"""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path

from bench.drain_tuned import drain_templates
from bench.loghub_eval import metrics, post_process
from worker.digest.templates import analyze

_PLACEHOLDER = re.compile(r"<(?:n|hex|ip|uuid|ts|q|\*)>")
KEYS = ("ga", "pa", "fga", "fta")
_HEXLIKE = re.compile(r"[0-9a-fA-F]{4,}")
_RUN = re.compile(r"<\*>(?:\s+<\*>)+")


def join_runs(template: str) -> str:
    """A run of variables separated by whitespace only as one `<*>`: the form of the benchmark's true templates
    (its evaluator generalizes them so), given to both parsers alike."""
    return _RUN.sub("<*>", template)


def loghub_form(t) -> str:
    """A template in the benchmark's form: each placeholder `<*>` (a quoted value `"<*>"`), but a variable that holds one value with no
    digit (not hex-looking, no path) on every line of a template of two or more lines is that text (it never varies: part of the message,
    as the digest's rendering shows it)."""
    it = iter(t.vars)

    def one(m: re.Match) -> str:
        v = next(it, None)
        if (v is not None and t.count >= 2 and v.distinct == 1 and not v.distinct_capped and v.top
                and not any(ch.isdigit() for ch in v.top[0][0]) and not _HEXLIKE.fullmatch(v.top[0][0])
                and "/" not in v.top[0][0]):
            return v.top[0][0]
        return '"<*>"' if m.group(0) == "<q>" else "<*>"

    return _PLACEHOLDER.sub(one, t.pattern)


def ribbon_templates(contents: list[str]) -> tuple[list[str], float]:
    """Ribbon's template per line in the benchmark's form (placeholders `<*>`), and process CPU seconds."""
    t0 = time.process_time()
    tm = analyze(contents)
    seconds = time.process_time() - t0
    forms = [loghub_form(t) for t in tm.templates]
    return [forms[k] if k >= 0 else "" for k in tm.line_template.tolist()], seconds


def _truth(folder: Path, name: str) -> tuple[list[str], list[str]] | None:
    path = folder / f"{name}_2k.log_structured.csv"
    if not path.exists():
        return None
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    corrected: dict[str, str] = {}
    cpath = folder / f"{name}_2k.log_templates_corrected.csv"
    if cpath.exists():
        with open(cpath, encoding="utf-8", errors="replace", newline="") as f:
            corrected = {r["EventId"]: r["EventTemplate"] for r in csv.DictReader(f)}
    return [r["Content"] for r in rows], [corrected.get(r["EventId"], r["EventTemplate"]) for r in rows]


def system(name: str, contents: list[str], truth: list[str], drain: bool) -> dict:
    """One system's figures: {"ribbon": {...}, "drain3_tuned": {...}} (GA, PA, FGA, FTA, templates, lines/s)."""
    out = {"lines": len(contents)}
    runs = [("ribbon", ribbon_templates)] + ([("drain3_tuned", lambda c: drain_templates(name, c))] if drain else [])
    for key, parse in runs:
        templates, seconds = parse(contents)
        row = metrics(contents, truth, [join_runs(t) for t in templates])
        row["lines_per_s"] = round(len(contents) / max(seconds, 1e-9))
        pp = metrics(contents, truth, [join_runs(post_process(t)) for t in templates])
        row["post_processed"] = {k: pp[k] for k in KEYS}
        out[key] = row
    return out


def loghub2(root: Path, drain: bool) -> dict:
    """Every system under root/loghub with a structured file: its figures by system name."""
    out = {}
    for folder in sorted(p for p in (root / "loghub").iterdir() if p.is_dir()):
        got = _truth(folder, folder.name)
        if got is not None:
            out[folder.name] = system(folder.name, *got, drain)
    return out


def totals(rows: dict) -> dict:
    """Means over the systems per parser, the systems where Ribbon's GA is below tuned Drain3's, PA < 0.5,
    and lines/s over all lines (total lines / total seconds)."""
    out: dict = {}
    for parser in ("ribbon", "drain3_tuned"):
        have = [r[parser] for r in rows.values() if parser in r]
        if not have:
            continue
        out[parser] = {k: round(sum(r[k] for r in have) / len(have), 4) for k in KEYS}
        out[parser]["post_processed"] = {k: round(sum(r["post_processed"][k] for r in have) / len(have), 4)
                                         for k in KEYS}
        lines = sum(r["lines"] for r in rows.values() if parser in r)
        seconds = sum(r["lines"] / r[parser]["lines_per_s"] for r in rows.values() if parser in r)
        out[parser]["lines_per_s"] = round(lines / max(seconds, 1e-9))
    out["ga_below_drain3_tuned"] = sorted(k for k, r in rows.items()
                                          if "drain3_tuned" in r and r["ribbon"]["ga"] < r["drain3_tuned"]["ga"])
    out["pa_below_0_5"] = sorted(k for k, r in rows.items() if r["ribbon"]["pa"] < 0.5)
    return out


def table(rows: dict) -> None:
    print("\nLoghub-2.0 metrics (Content lines; Ribbon | tuned Drain3)")
    print(f"{'system':12} " + " ".join(f"{k.upper():>5}" for k in KEYS) + " |" +
          " ".join(f"{k.upper():>5}" for k in KEYS) + f" {'lines/s':>9}")
    for name, r in rows.items():
        rb, dr = r["ribbon"], r.get("drain3_tuned", {})
        print(f"{name:12} " + " ".join(f"{rb[k]:5.3f}" for k in KEYS) + " |" +
              " ".join(f"{dr[k]:5.3f}" if k in dr else f"{'–':>5}" for k in KEYS) + f" {rb['lines_per_s']:9,}")
