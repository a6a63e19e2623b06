"""Host time of the decode loop's look at a round (CPU): the stop and loop look over the live rows and
the finishing of the rows that ended, per row in Python against over the token table at once.

A round as the 0.5B e2e-check runs it: `--rows` live rows (seats), `--width` generated ids at most
(max_new_tokens), ids drawn from the 0.5B's vocabulary (random weights), each row at its own length,
`--finished` of them ending in the round; the tiny tokenizer the benchmarks pair with random weights
and the worker's default stop string. Three ways, on the same rows, best of `--repeats`:

  stops only:   decode and a stop-string test per live row, the finishing without a loop cut
  per row:      the loop finder per row: loops_at_end on each live row, loop_start on each finished one
  table:        outputs.stopped_rows and outputs.finish_rows (loops_at_ends / loop_starts over the table)

"per row" and "table" must give the same stops and the same Generated (checked). The decode step of
the continuous batcher runs check_every (8) steps per look: the per-step figure is the look over 8.

    python -m bench.look_cost [--rows 256] [--width 64] [--finished 32] [--repeats 50] [--out PATH]
"""

from __future__ import annotations

import argparse
import platform
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from transformers import AutoTokenizer

from bench.results_io import RESULTS, command_line, save
from worker.engine.loops import loop_start, loops_at_end
from worker.engine.outputs import finish, finish_rows, stopped_rows
from worker.engine.tiny import make_tiny_checkpoint

VOCAB = 151_936  # Qwen2.5-0.5B's
CHECK_EVERY = 8


def _rows_way(eng, loops: bool):
    """The look and the finishing one row at a time (loops: with the loop finder per row)."""
    def look(table, counts, fin):
        hits = []
        for row, n in zip(table.tolist(), counts.tolist()):
            ids = row[:n]
            hit = loops and loops_at_end(ids)
            if not hit:
                text = eng.tokenizer.decode(ids, skip_special_tokens=True)
                hit = any(s in text for s in eng.options.stop_strings)
            hits.append(hit)
        gens = [finish(eng, row[:n], False, 100, loop_start(row[:n]) if loops else None)
                for row, n in zip(table[fin].tolist(), counts[fin].tolist())]
        return hits, gens
    return look


def _table_way(eng):
    def look(table, counts, fin):
        hits = stopped_rows(eng, table, counts).tolist()
        return hits, finish_rows(eng, table[fin], counts[fin], [False] * len(fin), [100] * len(fin))
    return look


def _best(fn, args, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=256, help="live rows at the look (seats)")
    ap.add_argument("--width", type=int, default=64, help="max_new_tokens")
    ap.add_argument("--finished", type=int, default=32, help="rows that end in the round")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--out", default=str(RESULTS / "look_cost_cpu.json"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(make_tiny_checkpoint(Path(tmp) / "tiny"))
    options = SimpleNamespace(stop_strings=("\n\n",), cut_loops=True)
    eng = SimpleNamespace(tokenizer=tok, eos_ids=(tok.eos_token_id,), options=options)
    rng = random.Random(0)
    table = np.array([[rng.randrange(VOCAB) for _ in range(a.width)] for _ in range(a.rows)], dtype=np.int64)
    counts = np.array([rng.randint(1, a.width) for _ in range(a.rows)], dtype=np.int64)
    fin = rng.sample(range(a.rows), min(a.finished, a.rows))
    counts[fin] = a.width  # at the length cap, as random weights end
    args = (table, counts, fin)
    per_row, by_table = _rows_way(eng, True)(*args), _table_way(eng)(*args)
    if per_row != by_table:
        raise SystemExit("the table look differs from the per-row look")
    ways = {"stops_only": _rows_way(SimpleNamespace(tokenizer=tok, eos_ids=eng.eos_ids,
                                                    options=SimpleNamespace(stop_strings=("\n\n",), cut_loops=False)),
                                    False),
            "per_row": _rows_way(eng, True), "table": _table_way(eng)}
    looks = {name: _best(fn, args, a.repeats) for name, fn in ways.items()}
    result = {"command": command_line("bench.look_cost", argv), "python": platform.python_version(),
              "machine": platform.machine(), "rows": a.rows, "width": a.width, "finished": len(fin),
              "repeats": a.repeats, "check_every": CHECK_EVERY,
              "look_ms": {k: 1e3 * v for k, v in looks.items()},
              "per_decode_step_ms": {k: 1e3 * v / CHECK_EVERY for k, v in looks.items()}}
    for k, v in looks.items():
        print(f"{k:>10}: look {1e3 * v:7.2f} ms, per decode step {1e3 * v / CHECK_EVERY:6.3f} ms")
    save(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
