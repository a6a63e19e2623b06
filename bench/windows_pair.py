"""A windowed stage for two trees side by side, in one run on one machine: this tree against a base.

    python -m bench.windows_pair                           # base: main; 3 pairs of 100,000 records, capacity
    python -m bench.windows_pair --stage ingest            # the ingest thread's per-record path alone
    python -m bench.windows_pair --base REF --pairs 5 --records 200000 --out PATH

The base (a git ref, default `main`) is checked out in a temporary worktree (`/tmp/ribbon-base-<commit>`)
with a virtual environment of its own that sees this one's packages (torch etc.) and builds the base's
C++ core; both are kept for the next run. Each pair runs the stage once in each tree, the order
alternating from pair to pair, so that a shared machine's load drifts over both alike.

- `capacity` (default): `python -m bench.windows --capacity` (bench/windows_capacity.py). Per run:
  records/s end to end (first record consumed to last output read), records consumed per second of
  ingest (first to last record consumed), and the ingest thread's CPU per record, with and without the
  digest passes (they run on the ingest thread below 8 cores), the finishing thread's CPU per window;
  bench/results/windows-capacity_cpu.json.
- `ingest`: bench/windows_ingest.py (this tree's script, over each tree's `worker`): the CPU per record
  of ingest's decoding into windows, no broker, no model, the least of `--repeats` runs;
  bench/results/windows-ingest_cpu.json.

The JSON holds every run, the medians per tree and the ratios this tree / base, per pair and of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.results_io import RESULTS, command_line, machine_name, save
from worker.config.load import env_var_for
from worker.pipeline.preprocess import auto_processes

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("records_per_s", "consumed_per_s", "ingest_cpu_us_per_record", "ingest_cpu_less_digest_us_per_record",
           "finishing_cpu_ms_per_window", "worker_overhead_pct")  # the capacity stage's; the ratios are of all but the last
INGEST_FIGURES = ("us_per_record", "records_per_cpu_s")
# bench/windows_ingest.py run in either tree by path (the base may not have it), that tree's `worker` imported
RUN_PATH = "import runpy, sys; sys.path.insert(0, ''); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def base_tree(ref: str) -> tuple[Path, str]:
    """A worktree of `ref` with a virtual environment whose Python has the base's `worker` and C++ core."""
    commit = git("rev-parse", ref)
    tree = Path(tempfile.gettempdir()) / f"ribbon-base-{commit[:12]}"
    if not (tree / ".git").exists():
        git("worktree", "add", "--detach", str(tree), commit)
    python = tree / ".venv" / "bin" / "python"
    if not (tree / ".venv" / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(tree / ".venv")], check=True)
        here = Path(sys.prefix)
        site = next(Path(p) for p in sys.path if p.startswith(str(here)) and p.endswith("site-packages"))
        theirs = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                                capture_output=True, text=True).stdout.strip()
        # the packages this environment sees (its own, then its .pth path lines), the base's own `worker` first
        lines = [str(site)] + [ln for pth in site.glob("*.pth") for ln in pth.read_text().splitlines()
                               if ln.strip() and not ln.startswith(("import", "#")) and Path(ln).is_dir()
                               and Path(ln) != ROOT]
        Path(theirs, "zz_base.pth").write_text("\n".join(lines) + "\n")
        print(f"building the base's C++ core in {tree} ...", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", "."],
                       cwd=tree, check=True)
        (tree / ".venv" / ".installed").touch()
    return tree, commit


def capacity(python: str, tree: Path, args, out: Path) -> dict:
    """One capacity run in `tree`; its figures."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}, **settings_env(args.setting)}
    cmd = [python, "-m", "bench.windows", "--capacity", "--records", str(args.records), "--seed", str(args.seed),
           "--max-new-tokens", str(args.max_new_tokens), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=args.timeout_s)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} in {tree} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    r = json.loads(out.read_text())
    e = r["end_to_end"]
    n = r["producer"]["records"]
    ingest = e["threads_cpu_s"].get("ribbon-ingest") or 0.0
    procs = given(args.setting).get("pipeline.preprocess_processes")
    in_thread = e["digest"]["cpu_s"] if auto_processes(int(procs) if procs else None) == 0 else 0.0  # on the ingest thread
    return {"records": n, "windows": e["windows"], "records_covered": e["records_covered"],
            "records_per_s": e["records_per_s"], "consumed_per_s": round(n / e["all_consumed_s"], 1),
            "all_consumed_s": e["all_consumed_s"], "wall_s": e["wall_s"], "ingest_cpu_s": ingest,
            "ingest_cpu_us_per_record": round(1e6 * ingest / n, 3),
            "ingest_cpu_less_digest_us_per_record": round(1e6 * (ingest - in_thread) / n, 3),
            "finishing_cpu_ms_per_window": round(1e3 * (e["threads_cpu_s"].get("ribbon-finishing") or 0.0)
                                                 / max(1, e["windows"]), 3),
            "digest_cpu_s": e["digest"]["cpu_s"], "digest_wait_s": e["digest"]["ingest_wait_s"],
            "threads_cpu_s": e["threads_cpu_s"],
            "process_cpu_s": e["process_cpu_s"], "engine_only_process_cpu_s": r["engine_only"]["process_cpu_s"],
            "worker_overhead_pct": r["worker_overhead_pct"], "bins": e["bins"], "closed_by": e["closed_by"],
            "overhead_s": e["overhead_s"], "end_s": e.get("end_s")}


def given(pairs: list[str]) -> dict[str, str]:
    """`--setting KEY=VALUE` arguments: dotted setting -> value."""
    return {k.strip(): v.strip() for k, v in (p.split("=", 1) for p in pairs)}


def settings_env(pairs: list[str]) -> dict[str, str]:
    """`--setting KEY=VALUE` (dotted settings) as the environment variables both trees' runs read."""
    return {env_var_for(k): v for k, v in given(pairs).items()}


def ingest_alone(python: str, tree: Path, args, out: Path) -> dict:
    """bench/windows_ingest.py (this tree's script) over `tree`'s `worker`; its figures."""
    cmd = [python, "-c", RUN_PATH, str(ROOT / "bench" / "windows_ingest.py"), "--records", str(args.records),
           "--repeats", str(args.repeats), "--seed", str(args.seed), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=args.timeout_s)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"bench/windows_ingest.py in {tree} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    r = json.loads(out.read_text())
    return {"records": args.records, "windows": r["windows"], "cpu_s": r["cpu_s"],
            "us_per_record": r["us_per_record"]["least"], "records_per_cpu_s": r["records_per_cpu_s"]["least"]}


STAGES = {"capacity": (capacity, FIGURES[:-1], "windows-capacity_cpu.json"),
          "ingest": (ingest_alone, INGEST_FIGURES, "windows-ingest_cpu.json")}


def summary(runs: dict[str, list[dict]], figures: tuple[str, ...] = FIGURES[:-1]) -> dict:
    med = {side: {f: statistics.median(r[f] for r in rs) for f in rs[0] if f in FIGURES + INGEST_FIGURES}
           for side, rs in runs.items()}
    pairs = [{f: round(h[f] / b[f], 3) if b[f] else None for f in figures}
             for h, b in zip(runs["head"], runs["base"])]
    return {"median": med,
            "ratio_of_medians": {f: round(med["head"][f] / med["base"][f], 3) for f in figures if med["base"][f]},
            "ratio_per_pair": pairs,
            "median_of_pair_ratios": {f: statistics.median(p[f] for p in pairs) for f in figures}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="git ref to compare this tree with (default: main)")
    ap.add_argument("--pairs", type=int, default=3, help="runs of each tree, alternating which goes first")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=900.0, help="longest one capacity run may take")
    ap.add_argument("--stage", choices=tuple(STAGES), default="capacity",
                    help="capacity: bench.windows --capacity (broker, model); ingest: bench/windows_ingest.py (the "
                         "ingest thread's per-record path alone)")
    ap.add_argument("--repeats", type=int, default=7, help="--stage ingest: runs per tree in each pair (the least)")
    ap.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                    help="capacity: a worker setting for both trees' runs, e.g. pipeline.preprocess_processes=2 "
                         "(passed as its RIBBON_ environment variable; repeatable)")
    ap.add_argument("--out", default=None, help="default bench/results/windows-capacity_cpu.json (--stage ingest: "
                                                "windows-ingest_cpu.json)")
    args = ap.parse_args(argv)
    bad = [p for p in args.setting if "=" not in p or not p.split("=", 1)[0].strip()]
    if bad:
        print(f"--setting takes KEY=VALUE (a dotted setting), got {bad[0]!r}", file=sys.stderr)
        return 2
    if min(args.pairs, args.records, args.repeats) < 1:
        print(f"--pairs, --records and --repeats must be >= 1, got {args.pairs}, {args.records}, {args.repeats}",
              file=sys.stderr)
        return 2
    try:
        base, base_commit = base_tree(args.base)
    except subprocess.CalledProcessError as exc:
        why = ((exc.stderr or "").strip().splitlines() or ["no message"])[0][:200]
        print(f"--base {args.base}: {' '.join(map(str, exc.cmd))} failed: {why}", file=sys.stderr)
        return 2
    trees = {"head": (sys.executable, ROOT), "base": (str(base / ".venv" / "bin" / "python"), base)}
    stage, figures, name = STAGES[args.stage]
    out = args.out or str(RESULTS / name)
    runs: dict[str, list[dict]] = {"head": [], "base": []}
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="ribbon-pair-") as tmp:
        for i in range(args.pairs):
            for side in (("base", "head") if i % 2 == 0 else ("head", "base")):
                python, tree = trees[side]
                r = stage(python, tree, args, Path(tmp) / f"{side}-{i}.json")
                r["pair"], r["started_load"] = i, os.getloadavg()[0]
                runs[side].append(r)
                print(f"pair {i} {side}: " + ", ".join(f"{f} {r[f]:,}" for f in figures), flush=True)
    load.append(os.getloadavg())
    result = {"benchmark": f"windows-{args.stage}-pair", "machine": machine_name("cpu"),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "load_avg": load,
              "head": git("rev-parse", "HEAD"), "head_dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "worker", "ext")),
              "base": {"ref": args.base, "commit": base_commit},
              "settings": {k: getattr(args, k) for k in ("stage", "pairs", "records", "max_new_tokens", "repeats", "seed",
                                                         "setting")},
              "runs": runs, **summary(runs, figures), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": command_line("bench.windows_pair", argv)}
    save(out, result)
    m, q = result["median"], result["median_of_pair_ratios"]
    print(f"median of {args.pairs} pairs, this tree / {args.base}: "
          + ", ".join(f"{f} {m['head'][f]:,} against {m['base'][f]:,} ({q[f]:.2f}x)" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
