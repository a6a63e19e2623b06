"""The publish gate on SmolLM2-135M-Instruct's summaries: what passes, what is published, what names the fault.

Corpus (bench/summaries_corpus.py): every synthetic kind of worker/demo/samples.py with its injected
faults, windows of the loghub development logs (/work/shared/devlogs) and the real format lines
(/work/shared/formats), each labelled with its fault line where it has one. Each document goes the
production way: one digest pass (worker/digest/prepared.py), the digest prompt when compaction pays,
the worker's engine (load_engine: the default guards, stop strings and loop cut) in packed bins on
this CPU, then the grounding check and the publish gate as the finishing stage runs them
(worker/pipeline/outputs.py `verdict_of`, `publish`).

It saves, overall and per set (labelled, synthetic, devlogs, formats):
- pass: per check of the gate (loop, grounded, copy, content, fact), the share of the model's texts
  that pass it, and `all` (the model's text is published);
- reasons: how many documents published the digest for each failed check;
- junk: published summaries (model or digest) that loop, hold too few content words, or cite an
  identifier found in neither the input nor its digest: 0 is the gate's promise;
- faults: the share of labelled fault lines named (half or more of the fault message's content
  words) by the model's raw text, by the published summary and by the digest rendering alone;
- model time per document (prefill and decode on this CPU, seconds) and prompt tokens.
Usage: python -m bench.summaries [--per-kind 2] [--lines 120] [--devlog-lines 40] [--formats 14]
       [--max-new-tokens 48] [--out bench/results/summaries_cpu.json] [--rescore]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from bench.results_io import RESULTS, save
from bench.summaries_corpus import corpus
from worker.config.settings import ModelSettings
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.prompt import failure_message
from worker.digest.render import render
from worker.digest.timeparse import parse_line
from worker.engine import load_engine
from worker.engine.loader import apply_cpu_threads
from worker.pipeline.app import resolve_model_path
from worker.pipeline.gate import CHECKS, MIN_CONTENT_WORDS, content_words, loops
from worker.pipeline.grounding import check
from worker.pipeline.inflight import Doc
from worker.pipeline.outputs import publish, verdict_of

WORD = re.compile(r"[A-Za-z0-9_./:-]+")
STOP = frozenset("a an the to of for in on at by from and or is was were be been after with".split())
SETS = ("labelled", "synthetic", "devlogs", "formats")
THIRD_PARTY = ("devlogs", "formats")  # their lines stay out of the project: rows keep scores, no texts
OPTS = PrepareOptions(highlights=0, compaction=True, min_saving=0.2, render=True)


def words(text: str) -> list[str]:
    return [w.lower().strip(".:,") for w in WORD.findall(text)]


def fault_named(summary: str, fault: str) -> bool:
    """Half or more of the fault message's content words (its header, timestamp and host left out)."""
    stamp = parse_line(fault.splitlines()[0])
    msg = failure_message(fault.splitlines()[0], stamp)
    content = [w for w in words(msg) if w not in STOP and not w.isdigit() and len(w) > 2]
    have = set(words(summary))
    return bool(content) and sum(w in have for w in content) >= max(1, len(content) // 2)


def junk(text: str, d: dict, digest: dict, source: str) -> list[str]:
    """What is wrong with a published summary: a loop, too few content words, an unsupported identifier
    (the model's text only: the digest rendering's figures are computed from the digest, e.g. a span in
    days, and its quotes are patterns cut short)."""
    out = []
    if loops(text):
        out.append("loop")
    if len(content_words(text)) < MIN_CONTENT_WORDS:
        out.append("content_free")
    if source == "model" and check(text, d["text"], digest, "", "off",
                                   extra=f"{d['source']} {d['kind']}").grounding.unsupported:
        out.append("ungrounded")
    return out


def score(docs: list[dict], prepared: list, raws: list[str]) -> list[dict]:
    rows = []
    for d, p, raw in zip(docs, prepared, raws):
        doc = Doc(tp=("bench", 0), epoch=0, offset=0, key=None, doc_id=d["id"], text=d["text"],
                  meta={"source": d["source"], "kind": d["kind"]}, received=0.0, prepared=p)
        verdict, _ = verdict_of(doc, p, raw, "drop")
        published, _ = publish(doc, p, raw, "drop")
        rendering = render(p.digest, d["source"], d["kind"])
        rows.append({"id": d["id"], "set": d["set"], "raw": raw, "published": published["text"],
                     "source": published["source"], "reason": published["reason"], "checks": verdict.checks,
                     "junk": junk(published["text"], d, p.digest, published["source"]),
                     "faults": {"model": [fault_named(raw, f) for f in d["faults"]],
                                "published": [fault_named(published["text"], f) for f in d["faults"]],
                                "digest": [fault_named(rendering, f) for f in d["faults"]]}})
    return rows


def _frac(xs) -> float:
    xs = list(xs)
    return round(sum(map(bool, xs)) / len(xs), 3) if xs else 0.0


def summarize(rows: list[dict]) -> dict:
    out = {}
    for name in ("all", *SETS):
        sel = rows if name == "all" else [r for r in rows if r["set"] == name]
        if not sel:
            continue
        faults = {k: [x for r in sel for x in r["faults"][k]] for k in ("model", "published", "digest")}
        out[name] = {
            "docs": len(sel),
            "pass": {c: _frac(r["checks"][c] for r in sel) for c in CHECKS} | {"all": _frac(r["source"] == "model"
                                                                                       for r in sel)},
            "reasons": dict(Counter(r["reason"] for r in sel).most_common()),
            "junk": {k: sum(k in r["junk"] for r in sel) for k in ("loop", "content_free", "ungrounded")},
            "faults": {k: _frac(v) for k, v in faults.items()} | {"n": len(faults["model"])},
        }
    return out


def generate(eng, prompts: list[str], bin_docs: int) -> tuple[list, list[float], list[int]]:
    """The engine's outputs, model seconds per document (its bin's time shared) and prompt tokens."""
    ids = eng.prompt_ids_batch(prompts)
    limit = (eng.max_positions or 10**9) - eng.options.max_new_tokens
    if max(map(len, ids)) > limit:
        raise SystemExit(f"a prompt of {max(map(len, ids))} tokens passes the model's {limit}: lower --lines")
    outs, secs, t0 = [], [], time.perf_counter()
    for b in range(0, len(ids), bin_docs):
        chunk = ids[b:b + bin_docs]
        cu = [0]
        for x in chunk:
            cu.append(cu[-1] + len(x))
        t = time.perf_counter()
        staged = eng.stage(torch.tensor([t for x in chunk for t in x], dtype=torch.int32), cu, max(map(len, chunk)))
        got = eng.generate(staged)
        secs += [(time.perf_counter() - t) / len(chunk)] * len(chunk)
        outs += got
        print(f"  {b + len(chunk)}/{len(ids)} documents, {time.perf_counter() - t0:.0f} s", flush=True)
    return outs, secs, [len(x) for x in ids]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-kind", type=int, default=2, help="documents per synthetic kind")
    ap.add_argument("--lines", type=int, default=120, help="lines of a labelled synthetic document")
    ap.add_argument("--devlog-lines", type=int, default=40, help="lines of a loghub window")
    ap.add_argument("--devlog-systems", type=int, default=13)
    ap.add_argument("--formats", type=int, default=14, help="formats of the real format lines taken")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--bin-docs", type=int, default=8)
    ap.add_argument("--wheel-dir", default=None)
    ap.add_argument("--out", default=str(RESULTS / "summaries_cpu.json"))
    ap.add_argument("--texts", default="/tmp/ribbon-summaries-texts.json", help="the whole result with every "
                    "text, outside the repository (--out keeps no text of the development logs or format lines)")
    ap.add_argument("--rescore", action="store_true", help="score the texts saved in --texts again (same corpus "
                    "arguments; no model run): after a change to the gate or the grounding check")
    args = ap.parse_args(argv)
    docs = corpus(args.per_kind, args.lines, args.devlog_lines, args.devlog_systems, args.formats)
    prepared = [prepare(d["text"], d["source"], d["kind"], OPTS) for d in docs]
    if args.rescore:
        result = json.loads(Path(args.texts).read_text())
        rows = score(docs, prepared, [r["raw"] for r in result["rows"]])
        for new, old in zip(rows, result["rows"]):  # the engine's fields of the run stay
            new.update({k: old[k] for k in ("finish_reason", "generated_tokens", "model_s", "prompt_tokens") if k in old})
        result.update({"rows": rows, "summary": summarize(rows), "rescored": True})
        _save(args, result)
        print(_line(result["summary"]["all"]))
        return 0
    cache = Path(os.environ.get("RIBBON_CACHE_DIR") or Path.home() / ".cache" / "ribbon")
    path = resolve_model_path("smollm2-135m", cache, args.wheel_dir)
    print(f"{len(docs)} documents ({dict(Counter(d['set'] for d in docs))}), "
          f"{sum(p.prompt is not None for p in prepared)} compacted; model {path}", flush=True)
    eng = load_engine(ModelSettings(path=path, device="cpu", dtype="float32", max_new_tokens=args.max_new_tokens))
    threads = apply_cpu_threads(None)
    t0 = time.perf_counter()
    outs, secs, prompt_tokens = generate(eng, [p.prompt or d["text"] for d, p in zip(docs, prepared)], args.bin_docs)
    wall = time.perf_counter() - t0
    rows = score(docs, prepared, [g.text.strip() for g in outs])
    for r, g, s, n in zip(rows, outs, secs, prompt_tokens):
        r.update({"finish_reason": g.finish_reason, "generated_tokens": len(g.token_ids), "model_s": round(s, 2),
                  "prompt_tokens": n})
    result = {"argv": sys.argv[1:] if argv is None else argv, "machine": platform.machine(), "cpus": os.cpu_count(),
              "threads": threads, "torch": torch.__version__, "model": "SmolLM2-135M-Instruct (fp32, CPU)",
              "max_new_tokens": args.max_new_tokens, "docs": len(docs), "wall_s": round(wall, 1),
              "model_s_per_doc": round(wall / len(docs), 2),
              "prompt_tokens_mean": round(sum(prompt_tokens) / len(docs), 1),
              "generated_tokens_mean": round(sum(len(g.token_ids) for g in outs) / len(docs), 1),
              "finish_reasons": dict(Counter(g.finish_reason for g in outs)),
              "summary": summarize(rows), "rows": rows}
    _save(args, result)
    print(_line(result["summary"]["all"]) + f"; model {result['model_s_per_doc']} s/doc")
    return 0


def _save(args, result: dict) -> None:
    """The whole result to --texts; to --out without the texts of third-party lines (their licences)."""
    save(args.texts, result)
    rows = [{k: v for k, v in r.items() if r["set"] not in THIRD_PARTY or k not in ("raw", "published")}
            for r in result["rows"]]
    save(args.out, {**result, "rows": rows})


def _line(a: dict) -> str:
    return (f"{a['docs']} docs: pass {a['pass']}; reasons {a['reasons']}; published junk {a['junk']}; "
            f"faults named {a['faults']}")


if __name__ == "__main__":
    raise SystemExit(main())
