"""bench/ingest_tokens.py end to end on a small corpus: both ways give the same gate decisions (it exits
otherwise, before writing), and it leaves the process without a pool tokenizer."""

from __future__ import annotations

import json

from bench import ingest_tokens
from worker.digest import prepared


def test_the_gate_moves_to_the_pool_and_decides_the_same(tmp_path):
    out = tmp_path / "ingest.json"
    assert ingest_tokens.main(["--documents", "64", "--batch", "32", "--repeats", "1", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["documents"] == 64 and r["compacted"] > 0  # the gate kept digest prompts: there was a decision
    assert set(r["ms_per_document"]) == {"gate_counted_on_ingest", "gate_counted_in_pool"}
    assert prepared._tokenizer is None  # the bench left this process as it found it
