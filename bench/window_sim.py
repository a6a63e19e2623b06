"""The window policies under simulated arrivals (discrete-event, virtual clock).

Drives the real C++ WindowPolicy and bin selection (bench/packer_sim.py) on
one simulated GPU whose pass takes t = a + tokens / rate. Prints a table per
service model and scenario, writes bench/results/window_sim_cpu.json and a plot.

    .venv/bin/python -m bench.window_sim [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from bench.packer_sim import ServiceModel, simulate, standard_policies

RESULTS = Path(__file__).resolve().parent / "results"
BUDGET, MAX_SEQS, EFFICIENT, MAX_WAIT_S, LATENCY_TARGET_S = 16384, 256, 8192, 0.05, 2.0
LEN_LO, LEN_HI = 65, 2530  # uniform document lengths (tokens)


def poisson(rng: np.random.Generator, rate_tokens: float, horizon: float) -> np.ndarray:
    mean_len = (LEN_LO + LEN_HI) / 2
    n = int(rate_tokens / mean_len * horizon * 1.2) + 100
    t = np.cumsum(rng.exponential(mean_len / rate_tokens, n))  # float64 [n]
    return t[t < horizon]


def on_off(rng: np.random.Generator, peak_tokens: float, on_s: float, off_s: float, horizon: float) -> np.ndarray:
    t = poisson(rng, peak_tokens, horizon)
    return t[np.mod(t, on_s + off_s) < on_s]  # arrivals only during the on phases


def ramp(rng: np.random.Generator, lo_tokens: float, hi_tokens: float, horizon: float) -> np.ndarray:
    t = poisson(rng, hi_tokens, horizon)  # thinning: keep with probability rate(t) / hi
    keep = rng.random(len(t)) < (lo_tokens + (hi_tokens - lo_tokens) * t / horizon) / hi_tokens
    return t[keep]


def scenarios(rng: np.random.Generator, capacity: float, horizon: float) -> dict[str, np.ndarray]:
    out = {f"poisson_{int(f * 100)}pct": poisson(rng, f * capacity, horizon) for f in (0.1, 0.5, 0.9, 1.2)}
    out["bursts_180pct_2s_on_2s_off"] = on_off(rng, 1.8 * capacity, 2.0, 2.0, horizon)
    out["ramp_10_to_120pct"] = ramp(rng, 0.1 * capacity, 1.2 * capacity, horizon)
    return out


def verdict(rows: dict[str, dict], tol: float) -> dict[str, object]:
    """Which fixed policies beat adaptive on both throughput (by more than tol) and p99."""
    ad = rows["adaptive"]
    best = max(r["throughput_tokens_per_s"] for r in rows.values())
    beaten_by = [
        name
        for name, r in rows.items()
        if name != "adaptive"
        and r["throughput_tokens_per_s"] > ad["throughput_tokens_per_s"] * (1 + tol)
        and r["p99_latency_s"] < ad["p99_latency_s"]
    ]
    return {"beaten_by": beaten_by, "adaptive_throughput_vs_best": ad["throughput_tokens_per_s"] / best}


def run(models: list[ServiceModel], horizons: dict[str, float], seed: int) -> dict:
    out: dict[str, dict] = {}
    for model in models:
        capacity = model.capacity(BUDGET)
        horizon = horizons[model.name]
        rng = np.random.default_rng(seed)
        res: dict[str, dict] = {}
        for scen, times in scenarios(rng, capacity, horizon).items():
            lengths = rng.integers(LEN_LO, LEN_HI + 1, len(times))  # int64 [n]
            rows = {}
            for pol in standard_policies(BUDGET, MAX_SEQS, EFFICIENT, MAX_WAIT_S, LATENCY_TARGET_S):
                rows[pol.name] = simulate(times, lengths, pol, model, BUDGET, 0)
            offered = float(lengths.sum() / horizon)
            tol = BUDGET / (horizon * max(r["throughput_tokens_per_s"] for r in rows.values()))
            res[scen] = {
                "offered_tokens_per_s": offered,
                "policies": rows,
                "strict": verdict(rows, 0.0),
                "resolution": tol,
                "within_resolution": verdict(rows, tol),
            }
        out[model.name] = {
            "overhead_s": model.overhead_s,
            "tokens_per_s": model.tokens_per_s,
            "capacity_tokens_per_s": capacity,
            "horizon_s": horizon,
            "scenarios": res,
        }
    return out


def print_table(results: dict) -> None:
    for model, m in results.items():
        print(f"\n== {model}: a={m['overhead_s'] * 1e3:.0f} ms, {m['tokens_per_s']:.0f} tok/s, "
              f"capacity {m['capacity_tokens_per_s']:.0f} tok/s, horizon {m['horizon_s']:.0f} s")
        for scen, s in m["scenarios"].items():
            v = s["within_resolution"]
            print(f"-- {scen}: offered {s['offered_tokens_per_s']:.0f} tok/s; adaptive/best thr "
                  f"{v['adaptive_throughput_vs_best']:.4f}; beaten by {v['beaten_by'] or 'none'} "
                  f"(strict: {s['strict']['beaten_by'] or 'none'})")
            print(f"   {'policy':<14}{'thr tok/s':>11}{'fill':>7}{'bins':>7}{'p50 ms':>9}{'p99 ms':>9}")
            for name, r in s["policies"].items():
                print(f"   {name:<14}{r['throughput_tokens_per_s']:>11.0f}{r['mean_fill']:>7.3f}{r['bins']:>7d}"
                      f"{r['p50_latency_s'] * 1e3:>9.1f}{r['p99_latency_s'] * 1e3:>9.1f}")


def plot(results: dict, path: Path) -> None:
    import matplotlib  # noqa: PLC0415 optional dependency (the [bench] extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 after matplotlib.use; the [bench] extra

    models = list(results)
    scen = list(results[models[0]]["scenarios"])
    fig, axes = plt.subplots(len(models), len(scen), figsize=(3.2 * len(scen), 3.0 * len(models)), squeeze=False)
    for r, model in enumerate(models):
        for c, name in enumerate(scen):
            ax = axes[r][c]
            rows = results[model]["scenarios"][name]["policies"]
            best = max(row["throughput_tokens_per_s"] for row in rows.values())
            for pol, row in rows.items():
                ax.scatter(row["throughput_tokens_per_s"] / best, row["p99_latency_s"] * 1e3, label=pol,
                           marker="*" if pol == "adaptive" else "o", s=90 if pol == "adaptive" else 30)
            ax.set_xlim(0.9, 1.01)  # differences under ~0.1% are below one bin over the horizon
            ax.set_yscale("log")
            ax.set_title(f"{model}\n{name}", fontsize=8)
            ax.set_xlabel("throughput / best policy", fontsize=7)
            ax.set_ylabel("p99 latency (ms)", fontsize=7)
            ax.tick_params(labelsize=6)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short horizons (a smoke run, noisier)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--overhead-7b-ms", type=float, default=20.0, help="a for the 7B-class model")
    ap.add_argument("--overhead-05b-ms", type=float, default=5.0, help="a for the 0.5B-class model")
    ap.add_argument("--stem", default=None, help="results file name (default window_sim[_quick])")
    args = ap.parse_args()
    models = [
        ServiceModel("7b_prefill", args.overhead_7b_ms / 1e3, 38_000.0),
        ServiceModel("0.5b_prefill", args.overhead_05b_ms / 1e3, 300_000.0),
    ]
    horizons = {"7b_prefill": 60.0 if args.quick else 600.0, "0.5b_prefill": 10.0 if args.quick else 120.0}
    t0 = time.perf_counter()
    results = run(models, horizons, args.seed)
    print_table(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = args.stem or ("window_sim-quick_cpu" if args.quick else "window_sim_cpu")
    meta = {"argv": vars(args), "budget": BUDGET, "max_seqs": MAX_SEQS, "efficient_tokens": EFFICIENT, "max_wait_s": MAX_WAIT_S,
            "latency_target_s": LATENCY_TARGET_S, "lengths": [LEN_LO, LEN_HI], "seed": args.seed,
            "reserve_per_seq": 0, "python": platform.python_version(), "wall_s": time.perf_counter() - t0}
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "models": results}, indent=1))
    plot(results, RESULTS / f"{stem}.png")
    print(f"\nwrote {RESULTS / (stem + '.json')} and .png in {meta['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
