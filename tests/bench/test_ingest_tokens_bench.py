"""bench/ingest_tokens.py end to end on a small corpus: both ways give the same gate decisions (it exits
otherwise, before writing), and it leaves the process without a pool tokenizer."""

from __future__ import annotations

import json

from bench import ingest_tokens
from worker.demo.samples import corpus
from worker.digest.prepared import PrepareOptions, prepare_many


def test_the_gate_moves_to_the_pool_and_decides_the_same(tmp_path):
    out = tmp_path / "ingest.json"
    assert ingest_tokens.main(["--documents", "64", "--batch", "32", "--repeats", "1", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["documents"] == 64 and r["compacted"] > 0  # the gate kept digest prompts: there was a decision
    assert set(r["ms_per_document"]) == {"gate_counted_on_ingest", "gate_counted_in_pool"}
    # the bench left this process as it found it: its passes count no tokens (no pool tokenizer)
    raws = ["\n".join(d["lines"]) for d in corpus(16, seed=11)]
    preps = prepare_many(raws, [None] * 16, [None] * 16, PrepareOptions(highlights=3, compaction=True,
                                                                        min_saving=0.2, render=False))
    assert any(p.prompt is not None for p in preps) and all(p.raw_tokens is None for p in preps)
