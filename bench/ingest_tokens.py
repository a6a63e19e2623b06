"""The ingest thread's tokenizing per document, with the compaction gate counted there or in the pool.

On the `short` corpus (the end-to-end benchmark's) with the tiny offline tokenizer, in poll batches of
256: the digest pass (what the preprocessing pool runs), then on the ingest thread the compaction gate
(`prompt_texts`) and the prompt ids, once with the gate's counts made on this thread (no pool, or a
tokenizer without a Rust backend) and once on counts the pool made (`use_tokenizer` in this process,
as a pool process's initializer sets it; the counting then shows in the pass's own time). Best of
`--repeats` per step, milliseconds per document, side by side in one run.

    .venv/bin/python -m bench.ingest_tokens
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from transformers import AutoTokenizer

from bench.results_io import RESULTS, machine_name, save
from worker.config.settings import load_settings
from worker.demo.samples import corpus
from worker.digest.prepared import PrepareOptions, prepare_many, use_tokenizer
from worker.engine.tiny import make_tiny_checkpoint
from worker.observability.metrics import Metrics
from worker.pipeline.planner import prompt_texts


def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256, help="documents per poll batch")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS / f"ingest_tokens_{machine_name()}.json"))
    a = ap.parse_args(argv)
    tok = AutoTokenizer.from_pretrained(str(make_tiny_checkpoint(Path(tempfile.mkdtemp()) / "tok")))
    count = lambda xs: [len(x) for x in tok(list(xs), add_special_tokens=False,  # noqa: E731
                                            split_special_tokens=True)["input_ids"]]
    digest = load_settings(environ={}).digest
    options = PrepareOptions(highlights=3, compaction=True, min_saving=digest.min_saving, render=False)
    raws = ["\n".join(d["lines"]) for d in corpus(a.documents, seed=11)]
    batches = [raws[i:i + a.batch] for i in range(0, len(raws), a.batch)]
    none = [None] * a.batch

    def passes():
        return [prepare_many(b, none[:len(b)], none[:len(b)], options) for b in batches]

    def ingest(preps):
        texts = []
        for b, p in zip(batches, preps):
            docs = [SimpleNamespace(text=t, prepared=x, window=None, document_tokens=0) for t, x in zip(b, p)]
            texts.append(prompt_texts(docs, digest, count, Metrics()))
        return texts

    def prompt_ids(texts):
        return [tok(t, add_special_tokens=False, split_special_tokens=True)["input_ids"] for t in texts]

    n = len(raws)
    pass_here, preps_here = _best(passes, a.repeats)
    gate_here, texts_here = _best(lambda: ingest(preps_here), a.repeats)
    ids_s, _ = _best(lambda: prompt_ids(texts_here), a.repeats)
    use_tokenizer(tok.backend_tokenizer)
    try:
        pass_pool, preps_pool = _best(passes, a.repeats)
    finally:
        use_tokenizer(None)
    gate_pool, texts_pool = _best(lambda: ingest(preps_pool), a.repeats)
    if texts_pool != texts_here:
        raise SystemExit("the gate decided differently on the pool's counts")
    ms = lambda s: round(1e3 * s / n, 4)  # noqa: E731
    result = {
        "machine": platform.machine(), "documents": n, "batch": a.batch, "repeats": a.repeats,
        "corpus": "short (worker.demo.samples.corpus, seed 11)", "tokenizer": "the tiny offline tokenizer",
        "compacted": sum(t != raw for tb, rb in zip(texts_here, batches) for t, raw in zip(tb, rb)),
        "ms_per_document": {
            "gate_counted_on_ingest": {"pool_pass": ms(pass_here), "ingest_gate": ms(gate_here),
                                       "ingest_prompt_ids": ms(ids_s), "ingest_total": ms(gate_here + ids_s)},
            "gate_counted_in_pool": {"pool_pass": ms(pass_pool), "ingest_gate": ms(gate_pool),
                                     "ingest_prompt_ids": ms(ids_s), "ingest_total": ms(gate_pool + ids_s)},
        },
        "command": "python -m bench.ingest_tokens",
    }
    for k, v in result["ms_per_document"].items():
        print(f"{k:24} pool pass {v['pool_pass']:.3f}  ingest gate {v['ingest_gate']:.3f}  "
              f"prompt ids {v['ingest_prompt_ids']:.3f}  ingest total {v['ingest_total']:.3f} ms/doc")
    save(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
