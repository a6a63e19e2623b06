"""Runs the C++ unit-test driver of the core (ext/tests), built with the extension."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _driver() -> Path:
    """The driver stays in the build tree (the wheel does not ship it: CMakeLists.txt)."""
    built = sorted(ROOT.glob("build/*/ribbon_core_tests"), key=lambda p: p.stat().st_mtime)
    if not built:
        pytest.fail("ribbon_core_tests was not built: run `make install`")
    return built[-1]


def test_cpp_core_unit_tests_pass():
    proc = subprocess.run([str(_driver())], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 failed checks" in proc.stdout
    assert "FAIL" not in proc.stdout


def test_cpp_driver_reports_a_failure(tmp_path):
    """The driver's exit code is meaningful: asking for no known case fails."""
    proc = subprocess.run([str(_driver()), "no_such_case"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
