"""Which packing order publishes most summaries by 80% of the model's work, in a backlog?

The H200 backlog of `bash bench/device_run.sh e2e` replayed without a GPU: the same 3,000 documents (the
bench's `short` corpus through the tiny tokenizer: 4.06 M prompt tokens), 8 partitions, the
autotuned budget (524,288), 64 new tokens, the ingest window (the packer holds at most
`pause_above_bins` bins' budget), and a bin time fitted to the engine alone on the H200
(`e2e_h200.json`: 12 bins in 11.4 s; decode is launch-bound, 64 steps x 1.93 ms a bin, prefill
about 410 k tokens/s). A summary is published once every earlier offset of its partition is done
(exactly-once); a bin's documents finish together. `published_at_80` is the share published when
80% of the model's work is done, the running bin's elapsed part counted as work.

Orders: `arrival` and `decreasing` are the C++ packer's (worker._core.PendingSet); the others are
candidates written here: the arrival prefix then the SHORTEST that fit (shortest-job-first fill),
the same with the prefix bounded to a share of the bin's seats, and shortest-head-first across
partitions (every bin still a prefix of each partition).

    .venv/bin/python -m bench.publication_sim   # -> bench/results/publication_sim_cpu.json
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from worker import _core
from worker.demo.samples import corpus
from worker.engine.tiny import make_tiny_checkpoint

BUDGET, RESERVE, WINDOW_BINS, KEYS = 524_288, 64, 4.0, 8
DECODE_S, PREFILL_TOK_S = 64 * 1.93e-3, 410_000.0


def lengths(n: int = 3000) -> np.ndarray:
    """Prompt tokens of the bench's documents (tiny tokenizer, as on the H200) plus the prompt frame."""
    tok = AutoTokenizer.from_pretrained(str(make_tiny_checkpoint(Path("/tmp/ribbon-pubsim-tok"))))
    texts = ["\n".join(d["lines"]) for d in corpus(n, seed=11)]
    return np.array([len(x) + 50 for x in tok(texts, add_special_tokens=False)["input_ids"]])


def core_order(order: str) -> Callable:
    def select(pending: list[int], lens: np.ndarray, keys: np.ndarray, max_seqs: int) -> list[int]:
        s = _core.PendingSet(BUDGET, RESERVE, order=order)
        for sid in pending:
            s.add(int(sid), int(keys[sid]), int(lens[sid]), float(sid))
        return [int(x) for x in s.select_bin(max_seqs)]
    return select


def prefix_then(fill: str, prefix_share: float = 1.0) -> Callable:
    def select(pending, lens, keys, max_seqs):
        room, out, i = BUDGET, [], 0
        while i < len(pending) and len(out) < int(max_seqs * prefix_share) and lens[pending[i]] + RESERVE <= room:
            room -= lens[pending[i]] + RESERVE
            out.append(pending[i])
            i += 1
        for sid in sorted(pending[i:], key=lambda s: (lens[s], s) if fill == "shortest" else (-lens[s], s)):
            if len(out) < max_seqs and lens[sid] + RESERVE <= room:
                room -= lens[sid] + RESERVE
                out.append(sid)
        return out
    return select


def shortest_head(pending, lens, keys, max_seqs):
    queues: dict[int, list[int]] = {}
    for sid in pending:
        queues.setdefault(int(keys[sid]), []).append(sid)
    at = dict.fromkeys(queues, 0)
    out, room = [pending[0]], BUDGET - lens[pending[0]] - RESERVE  # the oldest always goes (age bound)
    at[int(keys[pending[0]])] = 1
    while len(out) < max_seqs:
        heads = [(lens[q[at[k]]], q[at[k]], k) for k, q in queues.items()
                 if at[k] < len(q) and lens[q[at[k]]] + RESERVE <= room]
        if not heads:
            break
        n, sid, k = min(heads)
        out.append(sid)
        room -= n + RESERVE
        at[k] += 1
    return out


def backlog(select: Callable, lens: np.ndarray, keys: np.ndarray, max_seqs: int) -> dict:
    nxt, pending, bins = 0, [], []
    while nxt < len(lens) or pending:
        held = sum(int(lens[s]) + RESERVE for s in pending)
        while nxt < len(lens) and held < WINDOW_BINS * BUDGET:
            pending.append(nxt)
            held += int(lens[nxt]) + RESERVE
            nxt += 1
        b = select(pending, lens, keys, max_seqs)
        taken = set(b)
        pending = [s for s in pending if s not in taken]
        bins.append(b)
    times = np.array([DECODE_S + sum(int(lens[s]) for s in b) / PREFILL_TOK_S for b in bins])
    done = np.zeros(len(lens), dtype=bool)
    by_key = [np.flatnonzero(keys == k) for k in range(KEYS)]
    published, finished = [], []
    for b in bins:
        done[b] = True
        published.append(sum(len(i) if done[i].all() else int(np.argmin(done[i])) for i in by_key) / len(lens))
        finished.append(done.mean())
    k = int(np.searchsorted(np.cumsum(times), 0.8 * times.sum(), side="right"))  # bins finished by then
    return {"bins": len(bins), "work_s": round(float(times.sum()), 3), "published_at_80": round(published[k - 1], 4),
            "finished_at_80": round(float(finished[k - 1]), 4), "docs_per_bin": [len(b) for b in bins],
            "bin_s": [round(float(t), 3) for t in times]}


def main() -> None:
    lens = lengths()
    keys = np.random.default_rng(3).integers(0, KEYS, len(lens))
    orders = {"arrival (C++)": core_order("arrival"), "decreasing (C++)": core_order("decreasing"),
              "arrival prefix, then shortest": prefix_then("shortest"),
              "half-seat prefix, then shortest": prefix_then("shortest", 0.5),
              "half-seat prefix, then largest": prefix_then("largest", 0.5),
              "shortest head across partitions": shortest_head}
    out = {"documents": len(lens), "prompt_tokens": int(lens.sum()), "budget": BUDGET, "results": {}}
    for max_seqs in (256, 512):
        for name, select in orders.items():
            r = backlog(select, lens, keys, max_seqs)
            out["results"][f"{name}, max_seqs {max_seqs}"] = r
            print(f"max_seqs {max_seqs:4d}  {name:34s} bins {r['bins']:3d}  work {r['work_s']:6.2f} s  "
                  f"published at 80% of work {100 * r['published_at_80']:5.1f}%  "
                  f"(finished {100 * r['finished_at_80']:5.1f}%)")
    path = Path(__file__).resolve().parent / "results" / "publication_sim_cpu.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
