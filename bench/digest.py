"""The digest's cost, the compaction's saving and the fault recall, on the quality corpus (issue 8).

Prints a table and writes bench/results/digest.json:
- throughput: lines/s on one core of the templater alone and of the whole digest step (templates,
  digest, compaction), on 20,000-line documents of every kind; Drain3 (the maintained Python
  template miner) on the same lines, to show why the templater is our own C++;
- compaction: document tokens raw vs as the model sees them (digest lines + compacted text), per kind,
  with the tiny offline tokenizer (byte-level BPE: more tokens per character than a real model's);
- fault recall: injected fault lines present verbatim in the model's text, and among k=3 highlights.
Usage: python bench/digest.py [--per-kind 4] [--drain-lines 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from worker.digest.compact import compact
from worker.digest.digest import build_digest
from worker.digest.prompt import document_text
from worker.digest.templates import analyze
from worker.samples import LONG_LENGTHS, QUALITY_KINDS, labelled, quality_corpus
from worker.service.highlights import highlights

OUT = Path(__file__).resolve().parent / "results" / "digest.json"


def best_of(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def throughput(n_lines: int) -> dict:
    out = {}
    for kind in QUALITY_KINDS:
        lines = labelled(kind, 0, n_lines).message["lines"]
        raw = "\n".join(lines)
        t_tm = best_of(lambda: analyze(lines))
        t_all = best_of(lambda: compact(build_digest(analyze(lines)), raw, 0.2))
        out[kind] = {"lines": len(lines), "bytes_per_line": round(len(raw.encode()) / len(lines), 1),
                     "templater_lines_per_s": round(len(lines) / t_tm), "digest_lines_per_s": round(len(lines) / t_all)}
    return out


def drain3(n_lines: int) -> dict:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    lines = labelled("nf", 0, n_lines).message["lines"]
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    miner = TemplateMiner(config=cfg)
    t0 = time.perf_counter()
    for line in lines:
        miner.add_log_message(line)
    dt = time.perf_counter() - t0
    t_ours = best_of(lambda: analyze(lines))
    return {"kind": "nf", "lines": len(lines), "drain3_lines_per_s": round(len(lines) / dt),
            "drain3_templates": len(miner.drain.clusters), "ours_lines_per_s": round(len(lines) / t_ours),
            "ours_templates": len(analyze(lines).templates), "speedup": round(dt / t_ours, 1)}


def tokenizer_count():
    from transformers import AutoTokenizer

    from worker.engine.tiny import make_tiny_checkpoint

    path = make_tiny_checkpoint(Path(tempfile.mkdtemp()) / "tiny")
    tok = AutoTokenizer.from_pretrained(path)
    return lambda texts: [len(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]]


def quality(per_kind: int) -> dict:
    count = tokenizer_count()
    out = {}
    for kind in QUALITY_KINDS:
        rows = []
        for s in [x for x in quality_corpus(per_kind) if x.message["kind"] == kind]:
            lines = s.message["lines"]
            raw = "\n".join(lines)
            a = build_digest(analyze(lines))
            text = document_text(raw, a, min_saving=0.2, count=count)
            hl = highlights(lines, 3)
            rows.append({"lines": len(lines), "raw_tokens": text.raw_tokens or count([raw])[0],
                         "tokens": text.tokens or count([raw])[0], "compacted": text.compacted,
                         "templates": len(a.templates.templates), "true_templates": s.templates,
                         "faults": len(s.faults), "faults_in_text": sum(f.strip() in text.text for f in s.faults),
                         "faults_in_highlights": sum(f.strip() in hl for f in s.faults)})
        raw_t, t = sum(r["raw_tokens"] for r in rows), sum(r["tokens"] for r in rows)
        n_f = sum(r["faults"] for r in rows)
        out[kind] = {"documents": rows, "raw_tokens": raw_t, "tokens": t, "saving": round(raw_t / t, 1),
                     "never_more": all(r["tokens"] <= r["raw_tokens"] for r in rows),
                     "templates_exact": all(r["templates"] == r["true_templates"] for r in rows),
                     "fault_recall_in_text": sum(r["faults_in_text"] for r in rows) / n_f,
                     "fault_recall_in_highlights_k3": sum(r["faults_in_highlights"] for r in rows) / n_f}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-kind", type=int, default=4, help="documents per kind (lengths cycle through "
                    f"{LONG_LENGTHS})")
    ap.add_argument("--drain-lines", type=int, default=5000)
    ap.add_argument("--lines", type=int, default=20_000, help="lines per document in the throughput run")
    ap.add_argument("--throughput-only", action="store_true", help="lines/s only (no Drain3, no tokenizer)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    res = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "throughput": throughput(args.lines)}
    if args.throughput_only:
        for kind, tp in res["throughput"].items():
            print(f"{kind:10} {tp['bytes_per_line']:7.1f} B/line  templater {tp['templater_lines_per_s']:9,} lines/s  "
                  f"digest {tp['digest_lines_per_s']:9,} lines/s")
        _write(args.out, res)
        return
    res.update(drain3=drain3(args.drain_lines), compaction=quality(args.per_kind))
    print(f"{'kind':10} {'B/line':>7} {'templater l/s':>14} {'digest l/s':>11} {'tokens raw':>11} "
          f"{'model':>8} {'saving':>7} {'in text':>8} {'in hl(3)':>9}")
    for kind in QUALITY_KINDS:
        tp, q = res["throughput"][kind], res["compaction"][kind]
        print(f"{kind:10} {tp['bytes_per_line']:7.1f} {tp['templater_lines_per_s']:14,} {tp['digest_lines_per_s']:11,} "
              f"{q['raw_tokens']:11,} {q['tokens']:8,} {q['saving']:6.1f}x {q['fault_recall_in_text']:8.0%} "
              f"{q['fault_recall_in_highlights_k3']:9.0%}")
    d = res["drain3"]
    print(f"drain3 on {d['lines']} nf lines: {d['drain3_lines_per_s']:,} lines/s ({d['drain3_templates']} templates); "
          f"ours {d['ours_lines_per_s']:,} lines/s ({d['ours_templates']} templates): {d['speedup']}x")
    _write(args.out, res)


def _write(path: Path, res: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
