"""bench/device_run.sh on the CPU: --dry-run prints each stage's steps and their time limits, runs nothing.

What a device call would run must exist here (each `python3 -m bench X` benchmark, run through bench/__main__.py, each flag it is given,
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
    assert [argv[2:4] for _, argv in found] == [["bench", "e2e"], ["bench", "windows"]]
    assert total < DEVICE_CALL_S and sum(limit for limit, _ in found) < total  # the setup's limits counted too
    e2e = found[0][1]
    assert int(e2e[e2e.index("--runs") + 1]) >= 3  # the overhead is the median of three pairs or more
    assert found[0][0] >= 300  # the three pairs, the steady load and the group joins took about 290 s on the H200
    assert "--capacity" in found[1][1]


@pytest.mark.parametrize("stage", stages())
def test_every_stage_runs_what_exists(stage):
    found, _ = steps(stage)
    assert found, stage
    for limit, argv in found:
        assert argv[:2] == ["python3", "-m"] and 0 < limit < DEVICE_CALL_S, argv
        module = argv[2]
        if module == "bench":  # python3 -m bench X: the main of bench.X (bench/__main__.py)
            module, argv = f"bench.{argv[3]}", [*argv[:2], f"bench.{argv[3]}", *argv[4:]]
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


FAKE_PYTHON = """#!/bin/bash
# python3 of a device call, faked: pip installs nothing, pytest fails, a benchmark prints its arguments
case "$1 $2" in
  "-m pip") exit 0 ;;
  "-m pytest") echo "1 failed, 3 passed"; exit 1 ;;
  *) echo "ran $*" ;;
esac
"""


@pytest.fixture
def device(tmp_path):
    """A device's tools faked (python3, nvidia-smi), a wheels folder, an empty $OUT and its own temp folder."""
    bin_dir, whl, out = tmp_path / "bin", tmp_path / "whl", tmp_path / "out"
    for d in (bin_dir, whl, out):
        d.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "nvidia-smi").write_text("#!/bin/bash\necho 'index, name'\necho '0, NVIDIA H200'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (whl / "pkg-1.0-py3-none-any.whl").write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(out), "WHL": str(whl), "TMPDIR": str(tmp_path)}
    return env, out


def test_a_call_runs_each_step_logs_it_under_out_and_names_the_failed_ones(device):
    env, out = device
    r = subprocess.run(["bash", str(SCRIPT), "gpu-tests", "check"], capture_output=True, text=True, cwd=ROOT,
                       timeout=60, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NVIDIA H200" in (out / "gpu.txt").read_text()
    assert "1 failed" in (out / "gpu_tests_h200.txt").read_text()
    e2e = (out / "e2e-check_h200.txt").read_text()
    assert "ran -m bench e2e" in e2e and "--runs 3" in e2e and f"--out {out}/e2e-check_h200.json" in e2e
    assert "--capacity" in (out / "windows-capacity_h200.txt").read_text()
    assert r.stdout.rstrip().endswith("failed or stopped: gpu_tests_h200")


def test_a_call_on_an_h100_names_its_results_for_the_h100(device):
    env, out = device
    (smi := out.parent / "bin" / "nvidia-smi").write_text("#!/bin/bash\necho 'index, name'\necho '0, NVIDIA H100 80GB HBM3'\n")
    smi.chmod(0o755)
    r = subprocess.run(["bash", str(SCRIPT), "e2e-check", "windows-kill"], capture_output=True, text=True, cwd=ROOT,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"--out {out}/e2e-check_h100.json" in (out / "e2e-check_h100.txt").read_text()
    assert f"--log {out}/windows_kill_h100_worker.log" in (out / "windows_kill_h100.txt").read_text()
    assert not list(out.glob("*h200*"))
    r = subprocess.run(["bash", str(SCRIPT), "e2e-check"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**env, "MACHINE": "h200"})
    assert r.returncode == 0 and (out / "e2e-check_h200.txt").exists()


def test_no_step_starts_past_the_calls_limit(device):
    env, out = device
    r = subprocess.run(["bash", str(SCRIPT), "e2e", "steady"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**env, "CALL_S": "5"})
    assert r.returncode == 1 and "e2e_h200: not run" in r.stdout and "steady_h200: not run" in r.stdout
    assert not (out / "e2e_h200.txt").exists()
