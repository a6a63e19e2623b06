"""Each benchmark runs as `python -m bench.<name>` and records the command it ran with."""

from __future__ import annotations

import ast
import sys

import pytest

from bench.results_io import command_line
from helpers import ROOT

# main(args, argv) of a module that another benchmark's command line runs
RUN_BY_ANOTHER = {"windows_capacity": "python -m bench.windows --capacity"}


def _has_main_guard(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.stem)
def test_a_benchmark_with_a_main_runs_as_a_module(path):
    tree = ast.parse(path.read_text())
    if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        assert _has_main_guard(tree) or path.stem in RUN_BY_ANOTHER, f"python -m bench.{path.stem} would do nothing"


def test_the_recorded_command_holds_the_arguments_given_or_those_of_the_process(monkeypatch):
    assert command_line("bench.e2e", ["--runs", "3", "--steady", ""]) == "python -m bench.e2e --runs 3 --steady ''"
    monkeypatch.setattr(sys, "argv", ["bench/e2e.py", "--documents", "20"])
    assert command_line("bench.e2e", None) == "python -m bench.e2e --documents 20"


# The C++ extension (worker/_core.pyi types it): the packer's simulators drive its pieces directly.
PRIVATE_ALLOWED = {("worker", "_core")}


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.stem)
def test_a_benchmark_imports_only_public_names_of_the_worker(path):
    tree = ast.parse(path.read_text())
    private = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and (n.module or "").split(".")[0] == "worker" for a in n.names
               if (a.name.startswith("_") or "._" in f".{n.module}") and (n.module, a.name) not in PRIVATE_ALLOWED]
    assert not private, private
