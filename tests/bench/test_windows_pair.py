"""bench/windows_pair.py: its medians and ratios, and a bad invocation in one line."""

from __future__ import annotations

import pytest

from bench import windows_pair


def run(**figures):
    return {f: figures.get(f, 1.0) for f in windows_pair.FIGURES}


def test_ratios_are_this_tree_over_the_base_per_pair_and_of_the_medians():
    runs = {"head": [run(ingest_cpu_us_per_record=10.0), run(ingest_cpu_us_per_record=12.0),
                     run(ingest_cpu_us_per_record=30.0)],
            "base": [run(ingest_cpu_us_per_record=20.0), run(ingest_cpu_us_per_record=15.0),
                     run(ingest_cpu_us_per_record=30.0)]}
    s = windows_pair.summary(runs)
    assert s["median"]["head"]["ingest_cpu_us_per_record"] == 12.0
    assert s["median"]["base"]["ingest_cpu_us_per_record"] == 20.0
    assert s["ratio_of_medians"]["ingest_cpu_us_per_record"] == 0.6
    assert [p["ingest_cpu_us_per_record"] for p in s["ratio_per_pair"]] == [0.5, 0.8, 1.0]
    assert s["median_of_pair_ratios"]["ingest_cpu_us_per_record"] == 0.8


@pytest.mark.parametrize("argv,needle", [(["--pairs", "0"], "--pairs"),
                                         (["--base", "no-such-ref-anywhere"], "--base no-such-ref-anywhere")])
def test_a_bad_invocation_is_one_line_and_exit_2(argv, needle, capsys):
    assert windows_pair.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
