"""bench/device_run.sh on the CPU: --dry-run prints each stage's steps and their time limits, runs nothing.

What a device call would run must exist here (each `python3 -m bench.X` module, each flag it is given,
each test file), and the `check` stages fit one device call (600 s) with the setup's limits counted."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from helpers import ROOT

SCRIPT = ROOT / "bench" / "device_run.sh"
DEVICE_CALL_S = 600


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


def stages() -> list[str]:
    out = run("--list")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def steps(*names: str) -> tuple[list[tuple[int, list[str]]], int]:
    """(limit, argv) of each step of these stages, and the limits' sum the script reports."""
    out = run("--dry-run", *names)
    assert out.returncode == 0, out.stderr
    found = [(int(m[1]), shlex.split(m[2])) for m in re.finditer(r"^\s+\[\s*(\d+) s\] (.*) > \$OUT/\S+\.txt$",
                                                                  out.stdout, re.M)]
    total = int(re.search(r"^limits: (\d+) s in all", out.stdout, re.M)[1])
    return found, total


def test_the_check_fits_one_device_call_and_measures_three_pairs():
    found, total = steps("check")
    assert [argv[2] for _, argv in found] == ["pytest", "bench.e2e", "bench.windows"]
    assert total < DEVICE_CALL_S and sum(limit for limit, _ in found) < total  # the setup's limits counted too
    e2e = found[1][1]
    assert int(e2e[e2e.index("--runs") + 1]) >= 3  # the overhead is the median of three pairs or more
    assert "--capacity" in found[2][1]


@pytest.mark.parametrize("stage", stages())
def test_every_stage_runs_what_exists(stage):
    found, _ = steps(stage)
    assert found, stage
    for limit, argv in found:
        assert argv[:2] == ["python3", "-m"] and 0 < limit < DEVICE_CALL_S, argv
        module = argv[2]
        if module == "pytest":
            files = [a for a in argv if a.startswith("tests/")]
            assert files and all((ROOT / f).is_file() for f in files), argv
            continue
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        for flag in (a for a in argv[3:] if a.startswith("--")):
            assert f'"{flag}"' in source, (module, flag)  # a flag its argparse defines


def test_a_stage_it_does_not_have_is_one_line_and_exit_2():
    out = run("--dry-run", "e2e", "nonsense")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "nonsense" in out.stderr and "e2e-check" in out.stderr


def test_a_run_without_its_results_folder_is_refused():
    out = run("e2e")
    assert out.returncode == 2 and "OUT" in out.stderr and out.stderr.count("\n") == 1
