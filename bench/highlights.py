"""Time highlights() on 2,000-line documents against the first (regex) version, side by side.

The old version is read from git history (commit b7ecb90), so the comparison needs a checkout.
Prints a table and writes bench/results/highlights.json (best and median of 50 runs, k=3).
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

from worker.demo.samples import document
from worker.digest.highlights import highlights as new

OLD_REV = "b7ecb90"


def old_highlights():
    src = subprocess.run(["git", "show", f"{OLD_REV}:worker/digest/highlights.py"], capture_output=True,
                         text=True, check=True).stdout
    mod = types.ModuleType("highlights_old")
    exec(compile(src, "highlights_old", "exec"), mod.__dict__)  # noqa: S102 - our own file, from git
    return mod.highlights


def docs():
    for i, kind in enumerate(("trace", "syslog", "log", "crash", "pm")):
        yield kind, document(i, n_lines=2000)["lines"]
    rng = random.Random(1)
    yield "groups_of_5", [f"k{g:03d} " + "x" * (g % 7) + f" a={rng.randrange(100)} b={rng.randrange(10**6)}"
                          for g in range(400) for _ in range(5)]
    yield "hex_ids", [f"span {rng.randrange(16**16):016x} dur={rng.randrange(900)}us" for _ in range(2000)]


def timed(f, lines, n: int = 50) -> tuple[float, float]:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f(lines, 3)
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3, statistics.median(ts) * 1e3


def main() -> int:
    old = old_highlights()
    rows = []
    for name, lines in docs():
        nb, nm = timed(new, lines)
        ob, om = timed(old, lines)
        rows.append({"doc": name, "lines": len(lines), "chars": sum(map(len, lines)), "new_min_ms": round(nb, 3),
                     "new_median_ms": round(nm, 3), "old_min_ms": round(ob, 3), "old_median_ms": round(om, 3)})
        print(f"{name:12s} new {nb:6.2f} ms (median {nm:6.2f})   old {ob:6.2f} ms (median {om:6.2f})")
    out = Path("bench/results/highlights.json")
    out.write_text(json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                               "old_rev": OLD_REV, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
