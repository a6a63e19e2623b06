"""The digest's quality benchmark (bench/quality.py): its accuracy measures, and a run on the format corpus alone."""

from __future__ import annotations

import orjson

from bench.quality import grouping_accuracy, main, normalize, parsing_accuracy


def test_grouping_and_parsing_accuracy():
    assert grouping_accuracy([0, 0, 1, 2], ["a", "a", "b", "b"]) == 0.5
    assert grouping_accuracy([5, 5, 7], ["x", "x", "y"]) == 1.0
    assert normalize("send <n> <ip>  bytes to <*>") == "send <*> bytes to <*>"
    assert parsing_accuracy(["a <n>", "b"], ["a <*>", "c"]) == 0.5


def test_bench_quality_runs_on_the_format_corpus_alone(tmp_path):
    out = tmp_path / "q.json"
    assert main(["--devlogs", str(tmp_path / "none"), "--lines", "80", "--no-drain", "--out", str(out)]) == 0
    res = orjson.loads(out.read_bytes())
    assert "devlogs" not in res and res["formats_total"]["level_accuracy"] == 1.0
    assert res["formats_total"]["spans_inverted"] == 0 and res["formats_total"]["summaries_with_control_bytes"] == 0
