"""Packing efficiency: bins used against the lower bound ceil(total weight / budget).

Mixes of the issue: (a) the stress mix, 400 documents alternating 60-175 and
2,420-2,660 tokens; (b) uniform 65-2,530 tokens; (c) many short lines of 8-64
tokens. Budgets 8k, 16k, 64k tokens. The C++ selection runs on everything
pending at once (all_at_once) and as the packer streams (4 bins of weight
pending per bin formed). reserve_per_seq is 0, as in the issue's bound; the
--reserve flag adds a per-sequence reserve to weights and bound alike.

    .venv/bin/python -m bench.packer_fill [--reserve 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from bench.packer_mixes import MIXES

from worker import _core
from bench.packer_ref import lower_bound_bins

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = {"stress_60-175_2420-2660": 400, "uniform_65-2530": 4000, "short_lines_8-64": 100_000}
BUDGETS = (8192, 16384, 65536)


def measure(lengths: np.ndarray, budget: int, reserve: int, window: int) -> dict:
    assignment = _core.pack_offline(lengths.astype(np.uint32), budget, reserve, 65536, window)  # int64 [n]
    bins = int(assignment.max()) + 1
    weight = int(lengths.sum()) + reserve * len(lengths)
    per_bin = np.bincount(assignment, weights=lengths + reserve)  # float64 [bins]
    lb = lower_bound_bins(lengths.tolist(), budget, reserve)
    return {
        "bins": bins,
        "lower_bound": lb,
        "excess_over_bound": bins / lb - 1.0,
        "fill_ratio": weight / (bins * budget),
        "max_bin_weight": int(per_bin.max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reserve", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out: dict = {"meta": {"reserve_per_seq": args.reserve, "seed": args.seed, "sizes": SIZES}, "results": {}}
    print(f"{'mix':<26}{'n':>7}{'budget':>8}{'regime':>13}{'bins':>7}{'bound':>7}{'excess':>9}{'fill':>8}")
    for name, make in MIXES.items():
        lengths = make(np.random.default_rng(args.seed), SIZES[name])
        for budget in BUDGETS:
            for regime, window in (("all_at_once", 0), ("streaming", 4 * budget)):
                r = measure(lengths, budget, args.reserve, window)
                assert r["max_bin_weight"] <= budget
                out["results"].setdefault(name, {}).setdefault(str(budget), {})[regime] = r
                print(f"{name:<26}{len(lengths):>7}{budget:>8}{regime:>13}{r['bins']:>7}{r['lower_bound']:>7}"
                      f"{r['excess_over_bound']:>9.2%}{r['fill_ratio']:>8.4f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("packer_fill_cpu.json" if args.reserve == 0 else f"packer_fill-reserve{args.reserve}_cpu.json")
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
