"""Packing speed: the C++ packer against a straightforward pure-Python FFD.

Same 1,000,000 sequences, same rule, same bins (checked). Two regimes:
  streaming   as the packer runs: sequences arrive until `window` (4 bins of
              weight) is pending, one bin is formed, and so on; the Python
              baseline sorts the pending list and scans it for each bin;
  all_at_once every sequence pending at once; the Python baseline is the
              bucketed reference (bench/packer_ref.pack_reference), since a
              scan per bin would take hours on a million pending sequences.
Also the whole threaded packer through the Python facade (submit + next_bin +
release on 1,000,000 short lines, tokens written into the slots).

    .venv/bin/python -m bench.packer_speed [--n 1000000] [--budget 16384]
"""

from __future__ import annotations

import argparse
import json
import platform
import threading
import time
from pathlib import Path

import numpy as np
from bench.packer_mixes import MIXES, short_lines

from worker import _core
from worker.packer import Packer
from bench.packer_ref import pack_reference, pack_stream_reference

RESULTS = Path(__file__).resolve().parent / "results"


def as_assignment(bins: list[list[int]], n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)  # int64 [n]
    for k, b in enumerate(bins):
        out[b] = k
    return out


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def compare(lengths: np.ndarray, budget: int, max_seqs: int, window: int) -> dict:
    as_list = lengths.tolist()
    lengths_u32 = lengths.astype(np.uint32)  # uint32 [n]
    cpp, t_cpp = timed(lambda: _core.pack_offline(lengths_u32, budget, 0, max_seqs, window))
    if window:
        ref, t_py = timed(lambda: pack_stream_reference(as_list, budget, 0, max_seqs, window))
    else:
        ref, t_py = timed(lambda: pack_reference(as_list, budget, 0, max_seqs))
    n = len(lengths)
    return {
        "cpp_seqs_per_s": n / t_cpp,
        "python_seqs_per_s": n / t_py,
        "cpp_s": t_cpp,
        "python_s": t_py,
        "ratio": t_py / t_cpp,
        "bins": int(cpp.max()) + 1,
        "same_bins": bool(np.array_equal(cpp, as_assignment(ref, n))),
    }


def pipeline(n: int, budget: int) -> dict:
    """The threaded packer end to end from Python (short lines: 36 tokens on average)."""
    rng = np.random.default_rng(5)
    lens = short_lines(rng, n)
    pool = rng.integers(0, 50_000, int(lens.max()) + n, dtype=np.int32)  # int32 token pool
    starts = rng.integers(0, n, n)
    p = Packer(budget=budget, reserve_per_seq=0, max_seqs=1024, efficient_tokens=budget, max_wait_s=0.001, slots=3)
    got = [0, 0]

    def consume():
        while got[0] < n:
            b = p.next_bin(30.0)
            if b is None:
                return
            got[0] += len(b.seq_ids)
            got[1] += 1
            p.release(b.slot)

    c = threading.Thread(target=consume)
    t0 = time.perf_counter()
    c.start()
    for i in range(n):
        s = int(starts[i])
        p.submit(i, pool[s : s + int(lens[i])], key=i & 7)
    t_submit = time.perf_counter() - t0
    c.join()
    elapsed = time.perf_counter() - t0
    p.close()
    return {"sequences": n, "emitted": got[0], "bins": got[1], "seqs_per_s": n / elapsed,
            "tokens_per_s": float(lens.sum()) / elapsed, "submit_s": t_submit, "total_s": elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--budget", type=int, default=16384)
    ap.add_argument("--max-seqs", type=int, default=1024)
    args = ap.parse_args()
    out = {"meta": {"n": args.n, "budget": args.budget, "max_seqs": args.max_seqs, "reserve_per_seq": 0,
                    "window_bins": 4, "python": platform.python_version(), "machine": platform.machine()},
           "mixes": {}}
    print(f"{'mix':<26}{'regime':<13}{'C++ seq/s':>12}{'Python seq/s':>14}{'ratio':>8}{'bins':>9}  same")
    for name, make in MIXES.items():
        lengths = make(np.random.default_rng(0), args.n)
        out["mixes"][name] = {}
        for regime, window in (("streaming", 4 * args.budget), ("all_at_once", 0)):
            r = compare(lengths, args.budget, args.max_seqs, window)
            out["mixes"][name][regime] = r
            print(f"{name:<26}{regime:<13}{r['cpp_seqs_per_s']:>12.3g}{r['python_seqs_per_s']:>14.3g}"
                  f"{r['ratio']:>8.1f}{r['bins']:>9d}  {r['same_bins']}")
    pl = pipeline(args.n, args.budget)
    out["threaded_pipeline_short_lines"] = pl
    print(f"\nthreaded packer via the Python facade, {pl['sequences']} short lines: "
          f"{pl['seqs_per_s']:.3g} seq/s, {pl['tokens_per_s']:.3g} tokens/s, {pl['bins']} bins "
          f"(submit loop {pl['submit_s']:.2f} s, total {pl['total_s']:.2f} s)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "packer_speed_cpu.json").write_text(json.dumps(out, indent=1))
    print(f"wrote {RESULTS / 'packer_speed_cpu.json'}")


if __name__ == "__main__":
    main()
