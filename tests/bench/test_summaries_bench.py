"""bench/summaries.py scores texts as the finishing stage publishes them (no model here: texts given)."""

from __future__ import annotations

from bench.summaries import OPTS, score, summarize
from bench.summaries_corpus import synthetic
from worker.digest.prepared import prepare


def test_scores_count_checks_junk_and_faults_named():
    docs = synthetic(per_kind=1, lines=60)[:2]  # two labelled documents, two injected faults each
    prepared = [prepare(d["text"], d["source"], d["kind"], OPTS) for d in docs]
    fault = docs[1]["faults"][0]
    rows = score(docs, prepared, ["[1] " * 40, f"The failure: {fault}"])
    assert [r["reason"] for r in rows] == ["loop", "copy"]
    assert all(r["source"] == "digest" and r["junk"] == [] for r in rows)
    assert rows[1]["faults"]["model"][0] and all(rows[1]["faults"]["digest"])
    s = summarize(rows)["all"]
    assert s["pass"]["loop"] == 0.5 and s["pass"]["all"] == 0.0 and s["reasons"] == {"loop": 1, "copy": 1}
    assert s["junk"] == {"loop": 0, "content_free": 0, "ungrounded": 0} and s["faults"]["n"] == 4
