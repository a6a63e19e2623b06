"""The ingest thread's tokenizer: tokens/s on this host by tokenizer thread count.

The compaction gate and the planner tokenize every document on the ingest thread (the raw document
and its digest prompt counted, then the prompt tokenized for the model), in batches
the fast tokenizer spreads over its threads (the `tokenizers` library's Rayon pool: all cores,
unless TOKENIZERS_PARALLELISM=false or RAYON_NUM_THREADS says otherwise). Each thread count runs in
a process of its own (the pool is sized once per process): the tiny offline tokenizer, the raw
texts of the benchmark's corpus, in poll batches of 256.

    .venv/bin/python -m bench.tokenizer_threads --threads 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformers import AutoTokenizer

from bench.results_io import RESULTS, save
from worker.demo.samples import corpus
from worker.engine.tiny import make_tiny_checkpoint


def _measure(docs: int, batch: int, repeats: int) -> dict:
    tok = AutoTokenizer.from_pretrained(str(make_tiny_checkpoint(Path(tempfile.mkdtemp()) / "tok")))
    raws = ["\n".join(d["lines"]) for d in corpus(docs, seed=11)]
    batches = [raws[i:i + batch] for i in range(0, len(raws), batch)]
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        tokens = sum(len(x) for b in batches
                     for x in tok(b, add_special_tokens=False, split_special_tokens=True)["input_ids"])
        best = min(best, time.perf_counter() - t0)
    return {"tokens": tokens, "seconds": best, "tokens_per_s": tokens / best, "docs_per_s": docs / best}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--docs", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child's side
    ap.add_argument("--out", default=str(RESULTS / "tokenizer_threads_cpu.json"))
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(_measure(a.docs, a.batch, a.repeats)))
        return 0
    runs = []
    for n in [int(t) for t in a.threads.split(",")]:
        env = {**os.environ, "RAYON_NUM_THREADS": str(n), "TOKENIZERS_PARALLELISM": "true" if n > 1 else "false"}
        out = subprocess.run([sys.executable, "-m", __spec__.name, "--one", "--docs", str(a.docs), "--batch", str(a.batch),
                              "--repeats", str(a.repeats)], env=env, capture_output=True, text=True, check=True)
        r = {"threads": n, **json.loads(out.stdout.strip().splitlines()[-1])}
        runs.append(r)
        print(f"{n:3d} threads: {r['tokens_per_s'] / 1e6:6.2f} M tokens/s, {r['docs_per_s']:8.0f} raw docs/s")
    result = {"host": platform.node(), "cpus": os.cpu_count(),
              "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
              "env_TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM"), "batch": a.batch,
              "docs": a.docs, "runs": runs, "command": "bench/tokenizer_threads.py " + " ".join(argv)}
    save(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
