"""`python -m bench NAME`: a benchmark run so that the worker's child processes do not import it again."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT

# A child started by the forkserver (as the preprocessing pool's are) reports which main module it imported.
CHILD = """
import sys
def child(q):
    q.put(sorted(n for n, m in list(sys.modules.items()) if str(getattr(m, "__file__", "")).endswith("probe.py")))
"""
# The benchmark: its child's target lives elsewhere, as the pool's does (worker/pipeline/preprocess.py).
PROBE = """
import multiprocessing
from bench.probe_child import child
def main(argv=None):
    ctx = multiprocessing.get_context("forkserver")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print("child imported", q.get(timeout=60))
    p.join()
    return 0
if __name__ == "__main__":
    main()
"""


def run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_a_benchmark_run_through_bench_is_not_imported_again_by_its_workers_children(tmp_path):
    pkg = tmp_path / "bench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text((ROOT / "bench" / "__main__.py").read_text())
    (pkg / "probe.py").write_text(PROBE)
    (pkg / "probe_child.py").write_text(CHILD)
    direct = run("-m", "bench.probe", cwd=tmp_path)
    via = run("-m", "bench", "probe", cwd=tmp_path)
    assert "'__mp_main__'" in direct.stdout, direct.stderr  # the cost bench/__main__.py avoids
    assert "child imported []" in via.stdout, via.stderr


def test_it_passes_the_arguments_and_the_exit_status_through():
    r = run("-m", "bench", "cli_start", "--help")
    assert r.returncode == 0 and "usage" in r.stdout.lower()


def test_a_name_it_does_not_have_is_one_line_and_exit_2():
    for args in (["nonsense"], []):
        r = run("-m", "bench", *args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
