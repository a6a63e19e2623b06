"""bench/redaction.py's measures on a small corpus: recall and look-alike figures that move with the rules,
and a side-by-side cost whose two sides really differ by the pass."""

from __future__ import annotations

from bench import redaction
from bench.redaction_corpus import corpus
from worker.redaction import Policy, redactor


def test_recall_counts_secrets_that_stay_and_lookalikes_that_change():
    cases = corpus(seed=3, per_shape=2, lookalikes=40)
    on = redaction.labelled(cases, redactor(Policy()))
    off = redaction.labelled(cases, redactor(Policy(enabled=False)))
    assert on["recall"] == 1.0 and on["lookalike_false_redaction_rate"] == 0.0
    assert off["recall"] == 0.0 and off["lookalike_false_redaction_rate"] == 0.0  # nothing redacted: nothing found
    assert {"ggshield", "generated"} <= set(on["sources"]) and on["secrets"] == off["secrets"] > 60


def test_ordinary_lines_changed_are_counted_by_source():
    r = redactor(Policy())
    got = redaction.ordinary([("app", "INFO started\nERROR login password=hunter2")], [("fmt", "a b c")], r)
    assert got["lines"] == 3 and got["changed_lines"] == 1 and got["changed_by_source"] == {"app": 1}
    assert got["redactions_by_kind"] == {"password": 1}


def test_cost_runs_the_digest_pass_both_ways():
    texts = ["2024-05-01T10:00:00Z api-1 INFO ok n=%d\n2024-05-01T10:00:01Z api-1 ERROR password=x%d" % (i, i)
             for i in range(6)]
    c = redaction.cost("tiny", texts, repeats=1)
    assert c["documents"] == 6 and c["lines"] == 12
    assert c["digest_off_s"] > 0 and c["digest_on_s"] > 0 and c["redaction_alone_s"] > 0
    assert (c["redactions_on"], c["redactions_off"]) == (6, 0)  # the sides differ by the pass, and only by it


def test_first_pass_runs_fresh_processes_with_the_screen_and_without(tmp_path):
    for system in ("Alpha", "Beta"):     # a folder laid out as the development logs are, of our own lines
        folder = tmp_path / "loghub" / system
        folder.mkdir(parents=True)
        lines = [f"2024-05-01T10:00:{i % 60:02d}Z {system.lower()}-1 INFO request {i} done" for i in range(399)]
        (folder / f"{system}_2k.log").write_text("\n".join([*lines, "2024-05-01T10:07:00Z x ERROR password=hunter2"]))
    got = redaction.first_pass(1, tmp_path)
    (on,), (off,) = got["screen"]["runs"], got["union_only"]["runs"]
    assert on["documents"] == off["documents"] == 4 and on["first_ms"] > 0 and off["warm_ms"] > 0
    assert on["screen"] is (redactor(Policy()).rules.screen is not None) and off["screen"] is False
