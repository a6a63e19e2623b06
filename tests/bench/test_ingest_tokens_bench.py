"""bench/ingest_tokens.py end to end on a small corpus: both ways give the same gate decisions (it exits
otherwise), and with the pool's counts the ingest thread's gate tokenizes nothing."""

from __future__ import annotations

import json

from bench import ingest_tokens
from worker.digest import prepared


def test_the_gate_moves_to_the_pool_and_decides_the_same(tmp_path):
    out = tmp_path / "ingest.json"
    assert ingest_tokens.main(["--documents", "64", "--batch", "32", "--repeats", "1", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    here, pool = r["ms_per_document"]["gate_counted_on_ingest"], r["ms_per_document"]["gate_counted_in_pool"]
    assert r["documents"] == 64 and r["compacted"] > 0
    assert here["ingest_prompt_ids"] == pool["ingest_prompt_ids"]  # the same step, measured once
    assert prepared._tokenizer is None  # the bench left this process as it found it
