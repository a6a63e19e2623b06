"""The product, not the workshop: what `ribbon run` loads and what the wheel ships."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKSHOP = ("worker.demo", "bench")


def _imports_of(func_name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func_name)
    return {n.module for n in ast.walk(fn) if isinstance(n, ast.ImportFrom) and n.module}


def test_ribbon_run_imports_no_demo_or_benchmark_code():
    mods = _imports_of("cmd_run", ROOT / "worker" / "cli" / "main.py")
    assert mods and not [m for m in mods if m.startswith(WORKSHOP)]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in sorted(mods)) +
            "import worker.cli.main, worker.pipeline.app, worker.cli.ops, worker.cli.start\n"
            f"print([m for m in sys.modules if m.startswith({WORKSHOP!r})])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def _loaded_after(code: str) -> set[str]:
    """The top-level packages and worker modules in sys.modules after running `code` in a fresh interpreter."""
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120,
                         cwd=ROOT)
    return set(out.stdout.splitlines()[-1].split())


HEAVY = ("torch", "transformers", "confluent_kafka", "numpy", "worker.pipeline.app", "worker.demo.run")


def test_ribbon_help_loads_no_kafka_client_pipeline_or_torch():
    """The lazy imports of worker/cli/main.py and worker/cli/ops.py (`noqa: PLC0415`) keep `ribbon --help` light."""
    mods = _loaded_after("from worker.cli.main import build_parser\nbuild_parser().format_help()")
    assert "worker.cli.main" in mods and not [m for m in HEAVY if m in mods]


def test_a_digest_mode_validate_loads_no_torch_or_transformers(monkeypatch):
    """`ribbon validate` in digest mode without a broker checks settings and client properties only."""
    code = ("from worker.cli.main import main\n"
            "assert main(['validate', '--mode', 'digest']) == 0\n")
    for k in [k for k in os.environ if k.startswith("RIBBON_")]:
        monkeypatch.delenv(k)
    mods = _loaded_after(code)
    assert "worker.cli.validate" in mods and "confluent_kafka" in mods
    assert not {"torch", "transformers"} & mods


def test_oracles_simulators_and_benchmarks_live_outside_the_runtime_package():
    assert not list((ROOT / "worker").rglob("packer_ref.py")) and not list((ROOT / "worker").rglob("packer_sim.py"))
    assert (ROOT / "bench" / "packer_ref.py").is_file() and (ROOT / "bench" / "packer_sim.py").is_file()
    assert not (ROOT / "worker" / "bench").exists() and (ROOT / "bench" / "e2e.py").is_file()
    assert re.search(r'^wheel\.packages = \["worker"\]$', (ROOT / "pyproject.toml").read_text(), re.M)


def test_the_wheel_installs_the_extension_and_not_the_cpp_test_driver():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    installed = re.findall(r"install\(TARGETS\s+(\S+)", cmake)
    assert installed == ["_core"]
