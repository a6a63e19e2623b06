"""The old code's (main 74053c9) per-document pass, measured like bench/digest.py measures the new one.

The old code is built apart, then imported instead of this checkout's (its editable finder removed):
    git worktree add --detach /tmp/before 74053c9
    .venv/bin/python -m pip install --no-deps --no-build-isolation --target /tmp/before_site /tmp/before
    cd /tmp/before && /path/to/.venv/bin/python /path/to/bench/digest_old.py OUT.json
"""
import json
import os
import sys
import time

OLD = os.environ.get("RIBBON_OLD_SITE", "/tmp/before_site")
sys.path.insert(0, OLD)
sys.meta_path[:] = [f for f in sys.meta_path if "Redirect" not in type(f).__name__ and "Editable" not in type(f).__name__]
import worker  # noqa: E402

if not worker.__file__.startswith(OLD):
    raise SystemExit(f"imported {worker.__file__}, not the old build under {OLD}")
from worker.digest.compact import compact  # noqa: E402
from worker.digest.digest import build_digest
from worker.digest.prompt import digest_prompt
from worker.digest.templates import analyze
from worker.samples import QUALITY_KINDS, labelled, mixed_corpus
from worker.service.highlights import select

def best_of(fn, runs=3):
    best = float("inf")
    for _ in range(runs):
        t0 = time.process_time(); fn(); best = min(best, time.process_time() - t0)
    return best

def old_pass(text):   # what ingest + build_output did per document: digest, compaction, highlights
    lines = text.split("\n")
    a = build_digest(analyze(lines))
    tm = a.templates
    select(tm.lines, tm.line_template, tm.line_severity, a.line_z, 3)
    c = compact(a, text, 0.2)
    return digest_prompt(a.digest, c.text) if c.applied else None

res = {"code": "main 74053c9 (before)", "load_average": os.getloadavg(), "clock": "process CPU time", "throughput": {}}
for kind in QUALITY_KINDS:
    lines = labelled(kind, 0, 20000).message["lines"]
    raw = "\n".join(lines); per100 = len(raw.encode()) / 100 / len(lines)
    t_tm = best_of(lambda: analyze(lines)); t_all = best_of(lambda: old_pass(raw))
    res["throughput"][kind] = {"bytes_per_line": round(len(raw.encode()) / len(lines), 1),
        "templater_lines_per_s": round(len(lines) / t_tm), "pass_lines_per_s": round(len(lines) / t_all),
        "templater_100B_lines_per_s": round(len(lines) * per100 / t_tm), "pass_100B_lines_per_s": round(len(lines) * per100 / t_all)}
texts = ["\n".join(d["lines"]) for d in mixed_corpus(400, seed=11)]
n = sum(t.count("\n") + 1 for t in texts)
t_all = best_of(lambda: [old_pass(t) for t in texts]); t_tm = best_of(lambda: [analyze(t.split("\n")) for t in texts])
res["per_document"] = {"corpus": "mixed", "documents": 400, "pass_ms_per_document": round(1e3 * t_all / 400, 4),
    "templater_ms_per_document": round(1e3 * t_tm / 400, 4), "pass_lines_per_s": round(n / t_all)}
print(json.dumps(res, indent=1))
open(sys.argv[1], "w").write(json.dumps(res, indent=1) + "\n")
