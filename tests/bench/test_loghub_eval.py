"""The Loghub-2.0 metrics as the benchmark's evaluator defines them, on hand-made cases."""

from __future__ import annotations

import pytest

from bench.drain_tuned import SETTINGS, drain_templates
from bench.loghub_bench import join_runs, loghub_form, ribbon_templates, system, totals
from bench.loghub_eval import (align, general_correction, grouping, metrics, parsing_accuracy,
                                      post_process, template_accuracy)
from worker.digest.templates import analyze


def test_grouping_is_by_template_text_and_exact():
    truth = ["a <*>", "a <*>", "b", "c", "c"]
    assert grouping(truth, ["x", "x", "y", "z", "w"]) == pytest.approx((0.6, 2 * 0.5 * (2 / 3) / (0.5 + 2 / 3)))
    # two parser groups with one text are one group: "y" holds b and one c, so neither is right
    assert grouping(truth, ["x", "x", "y", "y", "z"])[0] == pytest.approx(0.4)


def test_parsing_and_template_accuracy():
    truth = ["a <*>", "a <*>", "b <*>"]
    assert parsing_accuracy(truth, ["a <*>", "a <*>", "b c"]) == pytest.approx(2 / 3)
    # FTA: parser template "a <*>" is right (its lines all carry it); "b c" is not
    assert template_accuracy(truth, ["a <*>", "a <*>", "b c"]) == pytest.approx(0.5)


def test_alignment_drops_empty_variables_and_truth_is_generalized():
    assert align("connection from 1.2.3.4 () at noon", "connection from <*> (<*>) at <*>") == \
        "connection from <*> () at <*>"
    assert general_correction("ip <*>.<*>.<*>:<*> at <*> <*>") == "ip <*> at <*>"
    assert align("no match here", "x <*>") == "x <*>"


def test_post_processing_rules():
    assert post_process("open /var/log/a.log  failed true") == "open <*> failed <*>"
    assert post_process("id 123 blk_<*> <*>.<*>") == "id <*> <*> <*>"


def test_metrics_of_a_perfect_parse():
    contents = ["user 1 in", "user 2 in", "boot"]
    truth = ["user <*> in", "user <*> in", "boot"]
    m = metrics(contents, truth, truth)
    assert (m["ga"], m["pa"], m["fga"], m["fta"]) == (1.0, 1.0, 1.0, 1.0)


def test_ribbon_in_the_benchmarks_form():
    contents = ["iar 003a90fc dear 00b360e8 mode quiet", "iar 00106210 dear 0244c1dc mode quiet"]
    templates, seconds = ribbon_templates(contents)
    assert templates == ["iar <*> dear <*> mode quiet"] * 2 and seconds >= 0
    assert loghub_form(analyze(["tty=ssh x=1", "tty=ssh x=2"]).templates[0]) == "tty=ssh x=<*>"
    assert join_runs("at <*> <*>  <*> done <*>") == "at <*> done <*>"


def test_one_system_side_by_side_with_tuned_drain():
    contents = [f"Received disconnect from 10.0.0.{i}: 11: Bye Bye" for i in range(20)]
    truth = ["Received disconnect from <*>: <*>: Bye Bye"] * 20
    row = system("OpenSSH", contents, truth, drain=True)
    assert row["ribbon"]["pa"] == 1.0 and row["ribbon"]["ga"] == 1.0
    assert set(row["drain3_tuned"]) >= {"ga", "pa", "fga", "fta", "lines_per_s", "post_processed"}
    t = totals({"OpenSSH": row})
    assert t["ribbon"]["pa"] == 1.0 and t["pa_below_0_5"] == []
    assert SETTINGS["Linux"][:2] == (6, 0.39)
    ids, _ = drain_templates("NoSuchSystem", contents[:2])
    assert len(ids) == 2
