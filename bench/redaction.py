"""The redaction pass measured (issue 41): recall on labelled secrets, false redactions, and its cost.

Prints a table and writes bench/results/redaction_cpu.json:
- recall: secrets of the labelled corpus (bench/redaction_corpus.py: ggshield's test secrets, whispers'
  key names and known token prefixes, the providers' token shapes) whose every secret substring is gone
  from the redacted text; by class;
- false redactions on look-alikes: generated block ids, hashes, hex addresses, UUIDs, counters, placeholders
  and prose that must come out unchanged; by class;
- false redactions on ordinary logs: lines changed among the development logs (../shared/devlogs: 13
  Loghub systems, 2,000 lines each) and the real format lines (../shared/formats) (counts by system and
  kind only: no line of them is written);
- cost, side by side in one run: the whole per-document digest pass (worker/digest/prepared.py) with the
  redaction pass on and off, on the development logs as whole documents and on the e2e benchmark's
  mixed corpus; CPU seconds of this process, per document the best of --repeats alternating calls
  (so other load on the shared machine counts less), summed; also the redaction pass alone and the
  share of ordinary lines its prefilter lets through to the line rules;
- the pass alone on a process's first documents and once seen (fresh processes that have run `install`, with
  the document screen and with the RE2 union alone, alternating; the development logs as 200-line documents).
Usage: python -m bench.redaction [--repeats 7] [--seed 41] [--per-shape 40] [--lookalikes 2000] [--first-rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.redaction_corpus import corpus
from bench.results_io import RESULTS, save
from worker.demo.samples import mixed_corpus
from worker.digest.prepared import PrepareOptions, prepare
from worker.redaction import Policy, redactor

SHARED = Path(__file__).resolve().parents[2] / "shared"


def labelled(cases, r) -> dict:
    by = defaultdict(lambda: [0, 0])
    for case in cases:
        out, _ = r.text(case.text)
        ok = all(s not in out for s in case.secrets) if case.label == "secret" else out == case.text
        by[(case.label, case.cls)][0] += ok
        by[(case.label, case.cls)][1] += 1
    rows = {label: {cls: {"right": v[0], "cases": v[1]} for (lab, cls), v in sorted(by.items()) if lab == label}
            for label in ("secret", "lookalike")}
    sec = [v for (lab, _), v in by.items() if lab == "secret"]
    look = [v for (lab, _), v in by.items() if lab == "lookalike"]
    return {"recall": sum(v[0] for v in sec) / sum(v[1] for v in sec), "secrets": sum(v[1] for v in sec),
            "lookalike_false_redaction_rate": 1 - sum(v[0] for v in look) / sum(v[1] for v in look),
            "lookalikes": sum(v[1] for v in look), "by_class": rows,
            "sources": sorted({c.source for c in cases})}


def devlog_documents() -> list[tuple[str, str]]:
    root = SHARED / "devlogs" / "loghub"
    return [(p.parent.name, p.read_text(encoding="utf-8", errors="replace")) for p in sorted(root.glob("*/*_2k.log"))]


def format_records() -> list[tuple[str, str]]:
    path = SHARED / "formats" / "formats.jsonl"
    return [(rec["format"], rec["line"]) for rec in map(json.loads, path.read_text(encoding="utf-8").splitlines())]


def ordinary(docs: list[tuple[str, str]], records: list[tuple[str, str]], r) -> dict:
    """Lines changed by the pass (each a false redaction: these logs hold no credential, as far as their
    readers know) and lines the prefilter lets through."""
    lines = changed = through = 0
    where: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for name, text in [*docs, *records]:
        out, counts = r.text(text)
        a, b = text.split("\n"), out.split("\n")
        lines += len(a)
        diff = sum(x != y for x, y in zip(a, b))
        changed += diff
        if diff:
            where[name] += diff
        kinds.update(counts)
        through += sum(1 for ln in a if r.rules.prefilter.search(ln.encode("utf-8", "replace")))
    return {"lines": lines, "changed_lines": changed, "false_redaction_rate": changed / lines,
            "changed_by_source": dict(where), "redactions_by_kind": dict(kinds),
            "prefilter_pass_rate": through / lines}


def _cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def cost(name: str, texts: list[str], repeats: int) -> dict:
    """Per document, the digest pass off and on (and the redaction pass alone) in turn, `repeats` times each;
    a document's time is its best of them (short intervals, so the shared machine's interruptions fall
    out), the corpus's the sum."""
    on = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True, redaction=Policy())
    off = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True, redaction=Policy(enabled=False))
    r = redactor(Policy())
    for o in (on, off):  # warm: rules compiled, RE2's DFA built, caches filled
        for t in texts[:3]:
            prepare(t, None, None, o)
    t_on = t_off = t_alone = 0.0
    for t in texts:
        runs = [(_cpu(lambda: prepare(t, None, None, off)), _cpu(lambda: prepare(t, None, None, on)),
                 _cpu(lambda: r.text(t))) for _ in range(repeats)]
        t_off += min(x[0] for x in runs)
        t_on += min(x[1] for x in runs)
        t_alone += min(x[2] for x in runs)
    lines = sum(t.count("\n") + 1 for t in texts)
    found = {label: sum(sum((prepare(t, None, None, o).redactions or {}).values()) for t in texts)
             for label, o in (("on", on), ("off", off))}  # the two sides differ by the pass: checked, untimed
    return {"corpus": name, "redactions_on": found["on"], "redactions_off": found["off"], "documents": len(texts), "lines": lines, "mbytes": sum(map(len, texts)) / 1e6,
            "digest_off_s": t_off, "digest_on_s": t_on, "overhead": t_on / t_off - 1,
            "redaction_alone_s": t_alone, "redaction_alone_share": t_alone / t_off,
            "ms_per_doc_off": 1e3 * t_off / len(texts), "ms_per_doc_on": 1e3 * t_on / len(texts)}


_FIRST = r'''
import dataclasses, json, sys, time
from pathlib import Path
from worker.redaction import Policy, install, redactor
install(Policy())                      # what the worker does at start
r = redactor(Policy())
if sys.argv[2] == "off":               # the RE2 union reads every document (no hyperscan)
    r.rules = dataclasses.replace(r.rules, screen=None)
texts = []
for f in sorted(Path(sys.argv[1]).glob("loghub/*/*_2k.log")):
    lines = f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n")
    texts += ["\n".join(lines[i:i + 200]) for i in range(0, len(lines), 200)]
times = []
for _ in range(6):
    t0 = time.process_time()
    for t in texts:
        r.text(t)
    times.append(time.process_time() - t0)
print(json.dumps({"documents": len(texts), "first_ms": 1e3 * times[0], "warm_ms": 1e3 * min(times[1:]),
                  "screen": r.rules.screen is not None}))
'''


def first_pass(rounds: int, devlogs: Path = SHARED / "devlogs") -> dict:
    """The pass alone over the development logs (`devlogs`: loghub/<System>/<System>_2k.log) as documents of
    200 lines, in fresh processes that have run `install` (a process's first pass, then its best of 5 more),
    with the document screen and without it (the RE2 union reading every document), alternating; medians over
    `rounds` processes of each."""
    runs: dict[str, list[dict]] = {"screen": [], "union_only": []}
    for _ in range(rounds):
        for name, arg in (("screen", "on"), ("union_only", "off")):
            out = subprocess.run([sys.executable, "-c", _FIRST, str(devlogs), arg], capture_output=True,
                                 text=True, check=True, cwd=Path(__file__).resolve().parents[1])
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {name: {"first_ms_median": statistics.median(x["first_ms"] for x in rs),
                   "warm_ms_median": statistics.median(x["warm_ms"] for x in rs), "runs": rs}
            for name, rs in runs.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--per-shape", type=int, default=40)
    ap.add_argument("--lookalikes", type=int, default=2000)
    ap.add_argument("--mixed-docs", type=int, default=500)
    ap.add_argument("--first-rounds", type=int, default=5, help="fresh processes of each side for the first pass")
    ap.add_argument("--out", default=str(RESULTS / "redaction_cpu.json"))
    a = ap.parse_args(argv)
    r = redactor(Policy())
    lab = labelled(corpus(a.seed, a.per_shape, a.lookalikes), r)
    docs, records = devlog_documents(), format_records()
    ordn = ordinary(docs, records, r)
    mixed = [d.get("text") or "\n".join(d.get("lines") or []) for d in mixed_corpus(a.mixed_docs, seed=11)]
    costs = [cost("devlogs (13 x 2,000 lines)", [t for _, t in docs], a.repeats),
             cost(f"mixed corpus ({a.mixed_docs} documents)", mixed, a.repeats)]
    result = {"benchmark": "redaction", "command": " ".join(["python -m bench.redaction", *(argv or sys.argv[1:])]),
              "python": platform.python_version(), "load_average": os.getloadavg(),
              "labelled": lab, "ordinary": ordn, "cost": costs, "first_pass": first_pass(a.first_rounds),
              "goals": {"recall": ">= 0.99", "ordinary_false_redaction_rate": "<= 0.001", "overhead": "<= 0.10"}}
    print(f"recall {lab['recall']:.4f} on {lab['secrets']} secrets; look-alikes changed "
          f"{lab['lookalike_false_redaction_rate']:.4%} of {lab['lookalikes']}")
    print(f"ordinary lines changed {ordn['changed_lines']} of {ordn['lines']} ({ordn['false_redaction_rate']:.4%}); "
          f"prefilter lets through {ordn['prefilter_pass_rate']:.2%}")
    for c in costs:
        print(f"{c['corpus']}: digest {c['digest_off_s']:.3f} s off, {c['digest_on_s']:.3f} s on "
              f"({c['overhead']:+.1%}); the pass alone {c['redaction_alone_s']:.3f} s "
              f"({c['redaction_alone_share']:.1%} of the digest)")
    fp = result["first_pass"]
    print(f"the pass alone, devlogs as 200-line documents (fresh processes, medians): first pass "
          f"{fp['screen']['first_ms_median']:.1f} ms, once seen {fp['screen']['warm_ms_median']:.1f} ms; the RE2 "
          f"union alone {fp['union_only']['first_ms_median']:.1f} / {fp['union_only']['warm_ms_median']:.1f} ms")
    save(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
