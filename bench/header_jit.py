"""The header grammar read by PCRE2's JIT against Python's re (worker/digest/header_jit.py), on the development logs.

Prints and writes bench/results/header_jit_cpu.json:
- per key (the 4,011 distinct shape keys of ../shared/devlogs' 13 Loghub logs, 26,000 lines), in µs: HEADER.match
  alone (Python's re); read_re (the match and the spans a parse reads, as Python's re gives them); the core's
  read of all keys in one call (the match, the spans, the Python objects); both first pass (the first read of each
  key in this process after the pattern is compiled) and warm (best of --reps passes);
- per key, one call into the core a key: the call's overhead that a batch spreads;
- per key, the recipe (header_rows.recipe's tuple), first pass (the level table's cache cleared) and warm: the
  Python recipe over the core's read (the match in the core, the rest in Python), that Python alone, and the core's
  recipe of all keys in one call (_core.HeaderRecipes: the match and the rest in the core);
- the first pass of header_rows.columns over each log (its parse memo cleared before each; CPU seconds of this
  thread, best of --reps): with the core's recipes, with the core's match and the Python recipe, and with every
  key read by Python's re (read_re) and the Python recipe;
- compile: HEADER compiled by Python's re, and by PCRE2 with its JIT (ms); the RSS growth of a process for one
  more PCRE2 matcher (KiB, the mean of 20 made in a fresh process: its compiled pattern, JIT code, match data);
  the same for the core's recipe reader (the grammar and the five small patterns: what a worker process compiles).
Timings are CPU seconds of this thread (other load counts less), the compile times wall-clock: the machine's
load average is recorded beside them.
- the development logs' first pass of the whole digest pass (worker/digest/prepared.py, redaction on; 130
  documents of 200 lines) in fresh processes of this tree, alternating the core's recipe and the Python recipe
  over the core's match, --first-pass-runs of each (ms a document, process CPU time; 0: not run).
Usage: python -m bench.header_jit [--reps 7] [--first-pass-runs 8] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.results_io import RESULTS, command_line, save
from worker import _core
from worker.digest import header_jit, header_rows
from worker.digest.header import HEADER

SHARED = Path(__file__).resolve().parents[2] / "shared"


_FIRST_PASS = r'''
import json, sys, time
from pathlib import Path
from worker.digest import header_jit, header_rows
from worker.digest.prepared import PrepareOptions, prepare
from worker.redaction import Policy, install
install(Policy(enabled=True))
o = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True, redaction=Policy(enabled=True))
if sys.argv[1] == "python":      # the core's match, the recipe in Python
    header_rows.recipes = lambda keys: list(map(header_rows.recipe, keys,
                                                header_jit.read(keys, header_rows._FIRSTS, header_rows._STARTS)))
    header_jit.matcher()
else:
    header_rows._reader()
texts = []
for f in sorted(Path(sys.argv[2]).glob("loghub/*/*_2k.log")):
    lines = f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n")
    texts += ["\n".join(lines[i:i + 200]) for i in range(0, len(lines), 200)]
t0 = time.process_time()
for t in texts:
    prepare(t, "bench", "log", o)
print(json.dumps(1e3 * (time.process_time() - t0) / len(texts)))
'''


def _first_pass(runs: int) -> dict:
    """The devlogs' first pass in fresh processes, the core's recipe and the Python recipe alternating."""
    got: dict[str, list[float]] = {"core_recipes": [], "core_read_python_recipe": []}
    for _ in range(runs):
        for name, mode in (("core_recipes", "core"), ("core_read_python_recipe", "python")):
            out = subprocess.run([sys.executable, "-c", _FIRST_PASS, mode, str(SHARED / "devlogs")],
                                 capture_output=True, text=True, check=True)
            got[name].append(round(json.loads(out.stdout.strip().splitlines()[-1]), 4))
    medians = {name: round(statistics.median(v), 4) for name, v in got.items()}
    return {"runs": got, "median": medians,
            "ratio": round(medians["core_recipes"] / medians["core_read_python_recipe"], 3)}


_RSS = r'''
import sys
from pathlib import Path
from worker import _core
from worker.digest import header_jit, header_rows
def rss():
    return next(int(ln.split()[1]) for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmRSS:"))
make = {"matcher": lambda: _core.HeaderMatcher(header_jit.PCRE_PATTERN),
        "recipes": lambda: _core.HeaderRecipes(header_jit.PATTERNS, header_rows._FIRSTS, header_rows._STARTS,
                                               header_rows._level)}[sys.argv[1]]
make()
before = rss()
kept = [make() for _ in range(20)]
print((rss() - before) / 20)
'''


def _rss_kib(what: str) -> float:
    """The RSS growth of one more HeaderMatcher ("matcher") or HeaderRecipes ("recipes") in a fresh process, KiB
    (the mean of 20 made and kept)."""
    out = subprocess.run([sys.executable, "-c", _RSS, what], capture_output=True, text=True, check=True)
    return round(float(out.stdout.strip().splitlines()[-1]))


def _per_key(fn, n: int, reps: int) -> tuple[float, float]:
    """(first pass, best of `reps` passes) of fn() in µs per key (CPU seconds of this thread)."""
    times = []
    for _ in range(reps + 1):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return round(times[0] / n * 1e6, 3), round(min(times[1:]) / n * 1e6, 3)


def _per_key_cold(fn, n: int, reps: int) -> tuple[float, float]:
    """_per_key, the level table's cache cleared before the first pass."""
    header_rows._level.cache_clear()
    return _per_key(fn, n, reps)


def _python_recipes(keys: list[str]) -> list[tuple]:
    """header_rows.recipes with the recipe in Python: the core's match (header_jit.read), then recipe()."""
    return list(map(header_rows.recipe, keys, header_jit.read(keys, header_rows._FIRSTS, header_rows._STARTS)))


def _columns_cpu(logs: list[str], reps: int) -> float:
    """CPU seconds of header_rows.columns over every log, its memo cleared before each (best of `reps`)."""
    best = float("inf")
    for _ in range(reps):
        total = 0.0
        for text in logs:
            header_rows._RECIPES.clear()
            t0 = time.thread_time()
            header_rows.columns(text, text.split("\n"))
            total += time.thread_time() - t0
        best = min(best, total)
    return round(best, 4)


class _ReOnly:
    """A matcher that leaves every line to Python's re (header_jit.read falls back to read_re)."""

    def read(self, keys, firsts, starts):
        return [None] * len(keys)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.header_jit", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--first-pass-runs", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS / "header_jit_cpu.json"))
    args = ap.parse_args(argv)
    files = sorted((SHARED / "devlogs").glob("loghub/*/*_2k.log"))
    if not files:
        print(f"no development logs under {SHARED / 'devlogs'} (the shared folder beside the repository)",
              file=sys.stderr)
        return 2
    logs = [f.read_text(encoding="utf-8", errors="replace").rstrip("\n") for f in files]
    keys = list(dict.fromkeys(header_rows.shape_key(ln) for text in logs for ln in text.split("\n")))
    firsts, starts = header_rows._FIRSTS, header_rows._STARTS

    t0 = time.perf_counter()
    re.compile(HEADER.pattern + "(?#bench)", re.M)           # a pattern not in re's cache
    re_compile_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    matcher = _core.HeaderMatcher(header_jit.PCRE_PATTERN)
    pcre_compile_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    reader = _core.HeaderRecipes(header_jit.PATTERNS, firsts, starts, header_rows._level)    # what a process compiles
    recipes_compile_ms = (time.perf_counter() - t0) * 1e3

    n, reps = len(keys), args.reps
    core_first, core_warm = _per_key(lambda: matcher.read(keys, firsts, starts), n, reps)
    match_first, match_warm = _per_key(lambda: [HEADER.match(k) for k in keys], n, reps)
    read_re_first, read_re_warm = _per_key(lambda: [header_jit.read_re(k, firsts, starts) for k in keys], n, reps)
    _, one_call = _per_key(lambda: [matcher.read([k], firsts, starts) for k in keys], n, reps)

    reads = header_jit.read(keys, firsts, starts)
    header_rows._reader()                                      # the process's reader, compiled before columns is timed
    recipe_python_first, recipe_python_warm = _per_key_cold(lambda: list(map(header_rows.recipe, keys, reads)), n, reps)
    split_first, split_warm = _per_key_cold(lambda: _python_recipes(keys), n, reps)
    recipes_first, recipes_warm = _per_key_cold(lambda: reader.read(keys), n, reps)
    assert header_rows._reader().read(keys) == _python_recipes(keys)

    core_columns = _columns_cpu(logs, reps)
    real_recipes = header_rows.recipes
    header_rows.recipes = _python_recipes                      # the match in the core, the recipe in Python
    try:
        split_columns = _columns_cpu(logs, reps)
        header_jit.matcher.cache_clear()
        real = header_jit.matcher
        header_jit.matcher = _ReOnly                           # every key read by read_re
        try:
            re_columns = _columns_cpu(logs, reps)
        finally:
            header_jit.matcher = real
    finally:
        header_rows.recipes = real_recipes

    result = {
        "command": command_line("bench.header_jit", argv), "load_average": list(os.getloadavg()),
        "python": sys.version.split()[0], "logs": len(logs), "lines": sum(t.count("\n") + 1 for t in logs),
        "keys": n, "non_ascii_keys": sum(not k.isascii() for k in keys),
        "per_key_us": {"re_match": {"first": match_first, "warm": match_warm},
                       "re_read": {"first": read_re_first, "warm": read_re_warm},
                       "core_read_batch": {"first": core_first, "warm": core_warm},
                       "core_read_one_call_a_key": {"warm": one_call}},
        "speedup_warm": {"vs_re_match": round(match_warm / core_warm, 2), "vs_re_read": round(read_re_warm / core_warm, 2)},
        "recipe_per_key_us": {"core_read_and_python_recipe": {"first": split_first, "warm": split_warm},
                              "python_recipe_alone": {"first": recipe_python_first, "warm": recipe_python_warm},
                              "core_recipes_batch": {"first": recipes_first, "warm": recipes_warm}},
        "columns_first_pass_cpu_s": {"core_recipes": core_columns, "core_read_python_recipe": split_columns,
                                     "re_python_recipe": re_columns,
                                     "saving_vs_python_recipe": round(1 - core_columns / split_columns, 3),
                                     "saving_vs_re": round(1 - core_columns / re_columns, 3)},
        "devlogs_first_pass_ms_per_document": _first_pass(args.first_pass_runs) if args.first_pass_runs > 0 else None,
        "compile_ms": {"re": round(re_compile_ms, 1), "pcre2_and_jit": round(pcre_compile_ms, 1),
                       "core_recipes": round(recipes_compile_ms, 1)},
        "pcre2_matcher_rss_kib": _rss_kib("matcher"), "core_recipes_rss_kib": _rss_kib("recipes"),
    }
    for k, v in result.items():
        print(f"{k}: {v}")
    save(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
