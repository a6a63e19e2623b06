"""The digest pass per document, this tree against another checkout, side by side in one run.

Each round runs the per-document pass (worker/digest/prepared.py: redaction where the tree has it, format
layer, templater, digest, highlights, compaction) over the same documents in three fresh processes, one after
the other, each taking each place in turn: the other tree, this tree, and this tree with redaction off
(`this_no_redaction`: the pass the other tree has where it predates redaction, worker/redaction/); each reports the best of --repeats passes over the
documents (CPU seconds of the process) and, apart, its first pass (nothing kept from an earlier
document: the cold cost; the process has done what the worker does at start, compiling the redaction
rules, where its tree has them). Writes bench/results/digest_side_cpu.json.

Corpora: `mixed` (the e2e benchmark's mixed corpus: short documents, every tenth a long log) and,
where present, the development logs (../shared/devlogs: Loghub systems, 2,000 lines each, cut into
documents of --doc-lines lines).

Usage: python -m bench.digest_side --base DIR [--rounds 3] [--documents 400]
DIR: a checkout of the other commit with its extension built (e.g. `git worktree add DIR COMMIT` and
the `_core` module copied into DIR/worker/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "digest_side_cpu.json"

_CHILD = r'''
import json, sys, time
root, corpus, n, repeats, doc_lines, devlogs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
redaction = sys.argv[7] == "on"
import importlib.util
if not (importlib.util.find_spec("worker").origin or "").startswith(root):   # not the installed tree
    sys.path.insert(0, root)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower() and "skbc" not in repr(f).lower()]
import worker
assert worker.__file__.startswith(root), worker.__file__
from worker.digest.prepared import PrepareOptions, prepare
o = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True)
try:  # what the worker does at start: the redaction rules compiled once (worker/redaction: install)
    from worker.redaction import Policy, install
    install(Policy(enabled=redaction))
    o = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True, redaction=Policy(enabled=redaction))
except ImportError:  # a tree without redaction
    assert redaction
if corpus == "mixed":
    from worker.demo.samples import mixed_corpus
    texts = ["\n".join(d["lines"]) for d in mixed_corpus(n, seed=11)]
else:
    from pathlib import Path
    texts = []
    for f in sorted(Path(devlogs).glob("loghub/*/*_2k.log")):
        lines = f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n")
        texts += ["\n".join(lines[i:i + doc_lines]) for i in range(0, len(lines), doc_lines)]
times = []
for _ in range(repeats):
    t0 = time.process_time()
    for t in texts:
        prepare(t, "bench", "log", o)
    times.append(time.process_time() - t0)
lines = sum(t.count("\n") + 1 for t in texts)
print(json.dumps({"documents": len(texts), "lines": lines, "first_ms": 1e3 * times[0] / len(texts),
                  "best_ms": 1e3 * min(times) / len(texts)}))
'''


def _run(root: Path, corpus: str, args, redaction: bool = True) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(root), corpus, str(args.documents), str(args.repeats),
                          str(args.doc_lines), str(args.devlogs), "on" if redaction else "off"], capture_output=True,
                         text=True, check=True, cwd=root)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="a checkout of the other commit, extension built")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5, help="passes over the documents per process")
    ap.add_argument("--documents", type=int, default=400, help="documents of the mixed corpus")
    ap.add_argument("--doc-lines", type=int, default=200, help="lines per development-log document")
    ap.add_argument("--devlogs", type=Path, default=ROOT.parent / "shared" / "devlogs")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if not (args.base / "worker").is_dir():
        print(f"bench.digest_side: no checkout at {args.base} (--base)", file=sys.stderr)
        return 2
    base_commit = subprocess.run(["git", "-C", str(args.base), "rev-parse", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
    this_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
    corpora = ["mixed"] + (["devlogs"] if (args.devlogs / "loghub").is_dir() else [])
    res = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_average_start": os.getloadavg(), "python": platform.python_version(), "clock": "process CPU time",
           "base": {"path": str(args.base), "commit": base_commit}, "this": {"commit": this_commit}, "corpora": {}}
    for corpus in corpora:
        rows = {"base": [], "this": [], "this_no_redaction": []}
        runs = [("base", args.base, True), ("this", ROOT, True), ("this_no_redaction", ROOT, False)]
        for r in range(args.rounds):
            for name, root, redaction in runs[r % 3:] + runs[:r % 3]:   # each takes each place in turn
                rows[name].append(_run(root, corpus, args, redaction))
        summary = {name: {"documents": rs[0]["documents"], "lines": rs[0]["lines"],
                          "best_ms_per_document": round(min(x["best_ms"] for x in rs), 4),
                          "first_pass_ms_per_document": round(min(x["first_ms"] for x in rs), 4),
                          "rounds": rs} for name, rs in rows.items()}
        base = summary["base"]
        for name, tag in (("this", ""), ("this_no_redaction", "_no_redaction")):
            summary["ratio_best" + tag] = round(summary[name]["best_ms_per_document"] / base["best_ms_per_document"], 3)
            summary["ratio_first_pass" + tag] = round(summary[name]["first_pass_ms_per_document"]
                                                      / base["first_pass_ms_per_document"], 3)
        res["corpora"][corpus] = summary
        print(f"{corpus}: base {summary['base']['best_ms_per_document']:.4f} ms/doc (first pass "
              f"{summary['base']['first_pass_ms_per_document']:.4f}), this {summary['this']['best_ms_per_document']:.4f} "
              f"(first pass {summary['this']['first_pass_ms_per_document']:.4f}): x{summary['ratio_best']} "
              f"(first pass x{summary['ratio_first_pass']}); redaction off x{summary['ratio_best_no_redaction']} "
              f"(first pass x{summary['ratio_first_pass_no_redaction']})")
    res["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
