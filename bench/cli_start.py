"""Start time of the `ribbon` command line: `ribbon --help` and a digest-mode `ribbon validate`.

Each command runs in a fresh interpreter `--runs` times; the best and the median wall and CPU times
(user + system, less disturbed by other load on a shared machine) are reported, with the cumulative
import time of worker.cli.main (`python -X importtime`), how many modules were loaded and which heavy
packages among them. `--before REF` measures the tree of a git revision as well
(its `worker/` extracted to a temporary folder), so a change to the imports is compared on the same
machine in the same minute.

    python -m bench.cli_start --runs 15 --before main
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "cli_start_cpu.json"
HEAVY = ("torch", "transformers", "confluent_kafka", "numpy", "prometheus_client", "opentelemetry", "tqdm")
COMMANDS = {"--help": ["--help"], "validate --mode digest": ["validate", "--mode", "digest"]}

# Runs worker.cli.main from `root` (not from the editable install, so that another tree can be measured),
# then prints the heavy packages loaded.
PROBE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path.insert(0, {root!r})
import io, contextlib
from worker.cli.main import main
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out):
    try:
        code = main({argv!r})
    except SystemExit as exc:
        code = exc.code
print("HEAVY", code, len(sys.modules), " ".join(m for m in {heavy!r} if m in sys.modules))
"""


def tree_of(ref: str, into: Path) -> Path:
    """The `worker/` folder of git revision `ref`, extracted under `into`."""
    data = subprocess.run(["git", "archive", ref, "worker"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_once(root: Path, argv: list[str], importtime: bool = False) -> tuple[float, float, float | None, int, int,
                                                                            list[str]]:
    """(wall s, CPU s, import s of worker.cli.main or None, exit code, modules loaded, heavy packages loaded)
    of one fresh run."""
    probe = PROBE.format(root=str(root), argv=argv, heavy=HEAVY)
    flags = ["-X", "importtime"] if importtime else []
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, *flags, "-c", probe], capture_output=True, text=True, check=True, cwd=root)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    _, code, n_modules, *loaded = out.stdout.strip().splitlines()[-1].split(" ")
    imp = None
    if importtime:
        line = next(x for x in out.stderr.splitlines() if x.rstrip().endswith("| worker.cli.main"))
        imp = int(line.split("|")[1]) / 1e6
    return wall, cpu, imp, int(code), int(n_modules), loaded


def measure(trees: dict[str, Path], argv: list[str], runs: int) -> dict:
    """Each tree in turn, run after run (the trees share the machine's load alike)."""
    walls: dict[str, list[float]] = {t: [] for t in trees}
    cpus: dict[str, list[float]] = {t: [] for t in trees}
    imports: dict[str, list[float]] = {t: [] for t in trees}
    last: dict[str, tuple[int, int, list[str]]] = {}
    for i in range(runs):
        for name, root in trees.items():
            wall, cpu, imp, code, n_modules, loaded = run_once(root, argv, importtime=i % 3 == 2)
            if imp is None:
                walls[name].append(wall)
                cpus[name].append(cpu)
            else:
                imports[name].append(imp)
            last[name] = (code, n_modules, loaded)
    return {name: {"exit_code": last[name][0], "wall_s_best": min(walls[name]),
                   "wall_s_median": statistics.median(walls[name]), "cpu_s_best": min(cpus[name]),
                   "cpu_s_median": statistics.median(cpus[name]),
                   "import_worker_cli_main_s_best": min(imports[name]) if imports[name] else None,
                   "modules_loaded": last[name][1], "heavy_loaded": last[name][2]} for name in trees}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cli_start", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="fresh interpreters per command and tree (default 15; "
                                                       "every third under -X importtime, left out of the wall times)")
    ap.add_argument("--before", metavar="REF", help="also measure this git revision's tree (e.g. main)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    trees = {"this tree": ROOT}
    with tempfile.TemporaryDirectory(prefix="ribbon-cli-start-") as tmp:
        if a.before:
            rev = subprocess.run(["git", "rev-parse", "--short", a.before], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip()
            trees = {f"{a.before} ({rev})": tree_of(a.before, Path(tmp)), **trees}
        by_cmd = {cmd: measure(trees, args, a.runs) for cmd, args in COMMANDS.items()}
    res = {name: {cmd: by_cmd[cmd][name] for cmd in COMMANDS} for name in trees}
    result = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
              "runs": a.runs, "trees": res, "command": "python -m bench.cli_start " + " ".join(argv or sys.argv[1:])}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'tree':20}{'command':24}{'wall best':>10}{'median':>8}{'CPU best':>9}{'median':>8}{'import':>8}"
          f"{'modules':>8}  heavy loaded")
    for name, cmds in res.items():
        for cmd, r in cmds.items():
            print(f"{name:20}{cmd:24}{r['wall_s_best']:10.3f}{r['wall_s_median']:8.3f}{r['cpu_s_best']:9.3f}"
                  f"{r['cpu_s_median']:8.3f}"
                  f"{r['import_worker_cli_main_s_best']:8.3f}{r['modules_loaded']:8d}  "
                  f"{' '.join(r['heavy_loaded']) or '-'}")
    print(f"wrote {a.out}")
    return 0 if all(r["exit_code"] == 0 for cmds in res.values() for r in cmds.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
