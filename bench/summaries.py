"""Quality of the generative path: SmolLM2-135M-Instruct's summaries against the digest rendering.

Corpus: the labelled quality corpus (worker/demo/samples.py: long logs of six kinds, two injected faults
each) and, where the folder exists, the first --devlog-lines lines of each loghub system in
/work/shared/devlogs (benchmark only). Each document goes the production way: one digest pass
(worker/digest/prepared.py), the digest prompt when compaction pays, the engine's packed prefill
and guarded batched decode, then the grounding check (worker/pipeline/grounding.py).

Per configuration (dtype x guards on/off) it prints and saves:
- ungrounded_before: fraction of raw model summaries holding an identifier found in neither the
  document nor its digest; ungrounded_after: the same for the published text (0 by construction);
  fallback: fraction replaced by the digest rendering (nothing survived);
- distinct_3gram: distinct word 3-grams over all 3-grams, per published summary, averaged;
- leakage: fraction of summaries holding a 4-word run of the instruction or of the prompt's
  labels (the model repeating its orders instead of summarizing);
- faults (labelled corpus): fraction of injected faults whose summary names the fault (half or
  more of the fault message's content words), its component (the host in the fault line) and
  its time (hh:mm); the same for the digest rendering;
- speed: documents/s and generated tokens/s of the model on this CPU.
Usage: python -m bench.summaries [--per-kind 2] [--lines 1000] [--devlog-lines 300] [--max-new-tokens 96]
       [--wheel-dir DIR] [--out bench/results/summaries_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import torch

from bench.results_io import RESULTS, save
from worker.config.settings import ModelSettings
from worker.demo.samples import QUALITY_KINDS, labelled
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.prompt import LOG_HEADER, _message
from worker.digest.render import render
from worker.digest.timeparse import parse_line
from worker.engine import load_engine
from worker.engine.guards import GuardConfig
from worker.engine.loader import apply_cpu_threads
from worker.pipeline.app import resolve_model_path
from worker.pipeline.grounding import check

DEVLOGS = Path("/work/shared/devlogs/loghub")
WORD = re.compile(r"[A-Za-z0-9_./:-]+")
STOP = frozenset("a an the to of for in on at by from and or is was were be been after with".split())


def corpus(per_kind: int, lines: int, devlog_lines: int, devlog_systems: int = 13) -> list[dict]:
    docs = []
    for kind in QUALITY_KINDS:
        for i in range(per_kind):
            s = labelled(kind, i, lines, seed=7)
            docs.append({"id": s.message["id"], "text": "\n".join(s.message["lines"]), "source": s.message["source"],
                         "kind": kind, "faults": list(s.faults), "set": "labelled"})
    max_docs = len(docs) + devlog_systems
    if devlog_lines and DEVLOGS.is_dir():
        for system in sorted(p.name for p in DEVLOGS.iterdir() if p.is_dir()):
            path = DEVLOGS / system / f"{system}_2k.log"
            text = "\n".join(path.read_text(errors="replace").splitlines()[:devlog_lines])
            if len(docs) >= max_docs:
                break
            docs.append({"id": f"loghub-{system}", "text": text, "source": system, "kind": "log", "faults": [],
                         "set": "devlogs"})
    return docs


def words(text: str) -> list[str]:
    return [w.lower().strip(".:,") for w in WORD.findall(text)]


def distinct3(text: str) -> float:
    w = words(text)
    grams = [tuple(w[i:i + 3]) for i in range(len(w) - 2)]
    return len(set(grams)) / len(grams) if grams else 1.0


def leaks(text: str, instruction: str) -> bool:
    low = " ".join(words(text))
    for source in (instruction, LOG_HEADER, "Facts: time lines failures elements causes ips"):
        w = words(source)
        if any(" ".join(w[i:i + 4]) in low for i in range(len(w) - 3)):
            return True
    return bool(re.search(r"(?i)\bfacts:|\blog \(each line", text))


def fault_named(summary: str, fault: str) -> dict:
    stamp = parse_line(fault)
    msg = _message(fault, stamp)
    host, _, rest = msg.partition(" ")
    content = [w for w in words(rest) if w not in STOP and not w.isdigit() and len(w) > 2]
    have = set(words(summary))
    named = bool(content) and sum(w in have for w in content) >= max(1, len(content) // 2)
    clock = stamp.text.partition("T")[2][:5] if stamp is not None else None
    return {"fault": named, "component": host.lower() in summary.lower(),
            "time": bool(clock) and clock in summary}


def score(docs, prepared, outs: list[str], instruction: str) -> list[dict]:
    """Per document: the grounding check before and after, repetition, leakage, fault naming."""
    rows = []
    for d, p, raw in zip(docs, prepared, outs):
        rendering = render(p.digest, d["source"], d["kind"])
        before = check(raw, d["text"], p.digest, rendering, "off", extra=d["source"])
        after = check(raw, d["text"], p.digest, rendering, "drop", extra=d["source"])
        again = check(after.text, d["text"], p.digest, rendering, "off", extra=d["source"])
        rows.append({"id": d["id"], "set": d["set"], "raw": raw, "published": after.text,
                     "unsupported": before.grounding.unsupported, "ungrounded_after": bool(again.grounding.unsupported),
                     "fallback": after.grounding.fallback, "distinct_3gram": distinct3(after.text),
                     "leak": leaks(raw, instruction),
                     "faults": [fault_named(raw, f) for f in d["faults"]],
                     "faults_published": [fault_named(after.text, f) for f in d["faults"]],
                     "faults_digest": [fault_named(rendering, f) for f in d["faults"]]})
    return rows


def run_config(eng, docs, prepared, guards_on: bool, max_new: int, bin_docs: int) -> dict:
    m = ModelSettings()
    eng.options.guards = GuardConfig(m.repetition_penalty, m.no_repeat_ngram, min(m.min_new_tokens, max_new)) \
        if guards_on else GuardConfig()
    eng.options.stop_strings = tuple(m.stop_strings) if guards_on else ()
    texts = [p.prompt or d["text"] for d, p in zip(docs, prepared)]
    ids = eng.prompt_ids_batch(texts)
    outs, t0, gen_tokens = [], time.perf_counter(), 0
    for b in range(0, len(ids), bin_docs):
        chunk = ids[b:b + bin_docs]
        cu = [0]
        for x in chunk:
            cu.append(cu[-1] + len(x))
        staged = eng.stage(torch.tensor([t for x in chunk for t in x], dtype=torch.int32), cu, max(map(len, chunk)))
        got = eng.generate(staged)
        print(f"  bin of {len(chunk)}: {time.perf_counter() - t0:.0f} s so far", flush=True)
        gen_tokens += sum(len(g.token_ids) for g in got)
        outs += [g.text.strip() for g in got]
    wall = time.perf_counter() - t0
    rows = score(docs, prepared, outs, eng.options.instruction)
    return {"wall_s": round(wall, 2), "docs_per_s": round(len(docs) / wall, 3),
            "generated_tokens_per_s": round(gen_tokens / wall, 1), "rows": rows, **summarize(rows)}


def _frac(xs) -> float:
    xs = list(xs)
    return round(sum(map(bool, xs)) / len(xs), 3) if xs else 0.0


def summarize(rows: list[dict]) -> dict:
    out = {}
    for name, sel in (("all", rows), ("labelled", [r for r in rows if r["set"] == "labelled"]),
                      ("devlogs", [r for r in rows if r["set"] == "devlogs"])):
        if not sel:
            continue
        res = {"docs": len(sel), "ungrounded_before": _frac(r["unsupported"] for r in sel),
               "ungrounded_after": _frac(r["ungrounded_after"] for r in sel),
               "fallback": _frac(r["fallback"] for r in sel),
               "distinct_3gram": round(sum(r["distinct_3gram"] for r in sel) / len(sel), 3),
               "leakage": _frac(r["leak"] for r in sel)}
        for key in ("faults", "faults_published", "faults_digest"):
            fs = [f for r in sel for f in r[key]]
            if fs:
                res[key] = {k: _frac(f[k] for f in fs) for k in ("fault", "component", "time")} | {"n": len(fs)}
        out[name] = res
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-kind", type=int, default=2)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--devlog-lines", type=int, default=300)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--devlog-systems", type=int, default=13, help="loghub systems taken (alphabetical)")
    ap.add_argument("--bin-docs", type=int, default=8)
    ap.add_argument("--configs", default="float32:on,float32:off,bfloat16:on")
    ap.add_argument("--wheel-dir", default=None)
    ap.add_argument("--out", default=str(RESULTS / "summaries_cpu.json"))
    ap.add_argument("--rescore", action="store_true", help="score the raw summaries saved in --out again (same "
                    "corpus arguments; no model run): after a change to the grounding check or the measures")
    args = ap.parse_args(argv)
    if args.rescore:
        return rescore(args)


    cache = Path(os.environ.get("RIBBON_CACHE_DIR") or Path.home() / ".cache" / "ribbon")
    path = resolve_model_path("smollm2-135m", cache, args.wheel_dir)
    docs = corpus(args.per_kind, args.lines, args.devlog_lines, args.devlog_systems)
    opts = PrepareOptions(highlights=0, compaction=True, min_saving=0.2, render=False)
    prepared = [prepare(d["text"], d["source"], d["kind"], opts) for d in docs]
    print(f"{len(docs)} documents ({sum(d['set'] == 'labelled' for d in docs)} labelled), "
          f"{sum(p.prompt is not None for p in prepared)} compacted; model {path}")
    result = {"argv": sys.argv[1:] if argv is None else argv, "machine": platform.machine(), "cpus": os.cpu_count(), "torch": torch.__version__,
              "threads": apply_cpu_threads(None), "max_new_tokens": args.max_new_tokens, "docs": len(docs),
              "configs": {}}
    for config in args.configs.split(","):
        dtype, guards = config.split(":")
        eng = load_engine(ModelSettings(path=path, device="cpu", dtype=dtype, max_new_tokens=args.max_new_tokens))
        res = run_config(eng, docs, prepared, guards == "on", args.max_new_tokens, args.bin_docs)
        result["configs"][config] = res
        print(f"{config:>14}: {res['docs_per_s']:.2f} docs/s, {res['generated_tokens_per_s']:.0f} tok/s; {_line(res)}")
        del eng
    save(args.out, result)
    return 0


def rescore(args) -> int:
    result = json.loads(Path(args.out).read_text())
    docs = corpus(args.per_kind, args.lines, args.devlog_lines, args.devlog_systems)
    opts = PrepareOptions(highlights=0, compaction=True, min_saving=0.2, render=False)
    prepared = [prepare(d["text"], d["source"], d["kind"], opts) for d in docs]
    instruction = ModelSettings().instruction
    for name, res in result["configs"].items():
        rows = score(docs, prepared, [r["raw"] for r in res["rows"]], instruction)
        for key in ("all", "labelled", "devlogs"):
            res.pop(key, None)
        res.update({"rows": rows, **summarize(rows)})
        print(f"{name:>14}: {_line(res)}")
    result["rescored"] = True
    save(args.out, result)
    return 0


def _line(res: dict) -> str:
    a = res["all"]
    return (f"ungrounded {a['ungrounded_before']:.2f} -> {a['ungrounded_after']:.2f} (fallback {a['fallback']:.2f}); "
            f"distinct 3-grams {a['distinct_3gram']:.2f}; leakage {a['leakage']:.2f}; "
            f"faults {res.get('labelled', {}).get('faults')} published {res.get('labelled', {}).get('faults_published')} "
            f"digest {res.get('labelled', {}).get('faults_digest')}")


if __name__ == "__main__":
    raise SystemExit(main())
