"""The digest's cost, the compaction's saving and the fault recall, on the quality corpus (issue 8).

Prints a table and writes bench/results/digest_cpu.json:
- throughput, per kind, on one 20,000-line document of each kind (CPU seconds of this process, best
  of 3, so other load on the machine counts less): lines/s of the templater (C++ call and its facade) and of the
  whole per-document pass (worker/digest/prepared.py: digest, highlights, compaction); both also as
  lines/s of 100-byte lines (bytes/s / 100); Drain3 (the maintained Python template miner) on the
  first --drain-lines lines of the same documents, in the same run;
- per document: the e2e benchmark's mixed corpus (`python -m bench.e2e --corpus mixed`: short
  documents, every tenth a long log): ms per document of the whole pass, of the templater call, and
  of finishing's output message (build_output with the pass done, schema check and encoding);
- compaction: document tokens raw vs as the model sees them (digest lines + compacted text), per kind,
  with the tiny offline tokenizer (byte-level BPE: more tokens per character than a real model's);
- fault recall: injected fault lines present verbatim in the model's text, and among k=3 highlights.
Usage: python -m bench.digest [--per-kind 4] [--drain-lines 5000] [--throughput-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from transformers import AutoTokenizer

from bench.drain_tuned import drain3_miner
from worker.pipeline.configs import finishing_config
from worker.config.settings import load_settings
from worker.demo.samples import LONG_LENGTHS, QUALITY_KINDS, labelled, mixed_corpus, quality_corpus
from worker.digest.digest import build_digest
from worker.digest.highlights import highlights
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.prompt import document_text
from worker.digest.templates import analyze, analyze_text
from worker.engine.tiny import make_tiny_checkpoint
from worker.messages.models import encode_output
from worker.pipeline.inflight import Doc
from worker.pipeline.outputs import build_output

OUT = Path(__file__).resolve().parent / "results" / "digest_cpu.json"
OPTIONS = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=False)


def best_of(fn, runs: int = 3) -> float:
    """Best CPU seconds of this process over `runs` calls."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9)


def drain3_seconds(lines: list[str]) -> tuple[float, int]:
    miner = drain3_miner()  # its default configuration
    t0 = time.process_time()
    for line in lines:
        miner.add_log_message(line)
    return max(time.process_time() - t0, 1e-9), len(miner.drain.clusters)


def throughput(n_lines: int, drain_lines: int) -> dict:
    out = {}
    try:
        import drain3  # noqa: F401, PLC0415 - the bench extra; a machine without it measures ours alone
    except ImportError:
        print("drain3 is not installed (pip install -e '.[bench]'): measuring ours alone")
        drain_lines = 0
    for kind in QUALITY_KINDS:
        lines = labelled(kind, 0, n_lines).message["lines"]
        raw = "\n".join(lines)
        data = raw.encode()
        per100 = len(data) / 100 / len(lines)          # 100-byte lines per line
        t_tm = best_of(lambda: analyze_text(raw, lines))
        t_all = best_of(lambda: prepare(raw, "bench", kind, OPTIONS))
        row = {"lines": len(lines), "bytes_per_line": round(len(data) / len(lines), 1),
               "templater_lines_per_s": round(len(lines) / t_tm), "pass_lines_per_s": round(len(lines) / t_all),
               "templater_100B_lines_per_s": round(len(lines) * per100 / t_tm),
               "pass_100B_lines_per_s": round(len(lines) * per100 / t_all)}
        if drain_lines:
            head = lines[:drain_lines]
            t_d, clusters = drain3_seconds(head)
            t_ours = best_of(lambda: prepare("\n".join(head), "bench", kind, OPTIONS))
            row.update(drain3_lines=len(head), drain3_lines_per_s=round(len(head) / t_d), drain3_templates=clusters,
                       pass_vs_drain3=round(t_d / t_ours, 1))
        out[kind] = row
    return out


def _doc(i: int, d: dict, text: str):
    doc = Doc(("in", 0), 1, i, None, d["id"], text, {"id": d["id"], "source": d["source"], "kind": d["kind"],
                                                     "attributes": None}, 0.0)
    doc.prepared = prepare(text, d["source"], d["kind"], OPTIONS)
    return doc


def output_messages(docs: list, s) -> None:
    """What finishing does per document with its pass done: build_output (schema checked) and encode."""
    for doc in docs:
        encode_output(build_output(doc, "summary", config=finishing_config(s, "bench"), now=1.0))


def per_document(n_docs: int) -> dict:
    """The whole pass and the templater call per document, on the e2e benchmark's mixed corpus."""
    corpus = mixed_corpus(n_docs, seed=11)
    texts = ["\n".join(d["lines"]) for d in corpus]
    docs = [_doc(i, d, t) for i, (d, t) in enumerate(zip(corpus, texts))]
    lines = sum(t.count("\n") + 1 for t in texts)
    t_all = best_of(lambda: [prepare(t, "bench", "mixed", OPTIONS) for t in texts])
    t_tm = best_of(lambda: [analyze_text(t) for t in texts])

    settings = load_settings(environ={})
    t_out = best_of(lambda: output_messages(docs, settings))
    return {"corpus": "mixed", "documents": len(texts), "lines_per_document": round(lines / len(texts), 1),
            "output_ms_per_document": round(1e3 * t_out / len(texts), 4),
            "bytes_per_line": round(sum(map(len, texts)) / lines, 1),
            "pass_ms_per_document": round(1e3 * t_all / len(texts), 4),
            "templater_ms_per_document": round(1e3 * t_tm / len(texts), 4),
            "pass_lines_per_s": round(lines / t_all)}


def tokenizer_count():
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
    ap.add_argument("--drain-lines", type=int, default=5000, help="lines per kind given to Drain3 (0: skip it)")
    ap.add_argument("--lines", type=int, default=20_000, help="lines per document in the throughput run")
    ap.add_argument("--documents", type=int, default=400, help="documents of the per-document run")
    ap.add_argument("--throughput-only", action="store_true", help="lines/s and per-document cost only (no tokenizer)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    res = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg(), "python": platform.python_version(), "clock": "process CPU time",
           "throughput": throughput(args.lines, args.drain_lines), "per_document": per_document(args.documents)}
    print(f"{'kind':10} {'B/line':>7} {'templater l/s':>14} {'pass l/s':>10} {'pass 100B l/s':>14} "
          f"{'drain3 l/s':>11} {'vs drain3':>9}")
    for kind, tp in res["throughput"].items():
        print(f"{kind:10} {tp['bytes_per_line']:7.1f} {tp['templater_lines_per_s']:14,} {tp['pass_lines_per_s']:10,} "
              f"{tp['pass_100B_lines_per_s']:14,} {tp.get('drain3_lines_per_s', 0):11,} "
              f"{tp.get('pass_vs_drain3', 0):8.1f}x")
    d = res["per_document"]
    print(f"per document ({d['documents']} mixed, {d['lines_per_document']} lines, {d['bytes_per_line']} B/line): "
          f"pass {d['pass_ms_per_document']:.3f} ms, templater call {d['templater_ms_per_document']:.3f} ms, "
          f"output message {d['output_ms_per_document']:.3f} ms")
    if not args.throughput_only:
        res["compaction"] = quality(args.per_kind)
        print(f"{'kind':10} {'tokens raw':>11} {'model':>8} {'saving':>7} {'in text':>8} {'in hl(3)':>9}")
        for kind, q in res["compaction"].items():
            print(f"{kind:10} {q['raw_tokens']:11,} {q['tokens']:8,} {q['saving']:6.1f}x "
                  f"{q['fault_recall_in_text']:8.0%} {q['fault_recall_in_highlights_k3']:9.0%}")
    _write(args.out, res)


def _write(path: Path, res: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
