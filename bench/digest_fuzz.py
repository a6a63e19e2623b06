"""The per-document pass against mixed, damaged documents built from the shared corpora, for a while.

    python -m bench.digest_fuzz [--seconds 600] [--seed 1] [--keep DIR] [--out bench/results/digest_fuzz_cpu.json]
                                [--growth]

Lines of ../shared/formats/formats.jsonl and ../shared/devlogs/loghub/*/*_2k.log (read here, at run time)
feed tests/digest/docgen.py's generator; each document goes through prepare() (digest, highlights,
compaction, rendering) and docgen.check. Every distinct failure (exception type and the innermost frame of
worker/, a broken invariant, or a pass slower than --slow seconds plus a second a megabyte) is counted once with its first seed, and
the document is written under --keep to reproduce it. The run's figures (documents, failures by class with
their first seed and count, the slowest pass) go to --out. --growth also times the pass on one line of one
unit repeated (GROWTH_UNITS, after each of GROWTH_HEADS) at 16k, 64k and 256k characters: a pass linear in
the line's length takes 4x the time for 4x the characters (`ratio`: the worst of the two steps).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import time
import traceback
from pathlib import Path

from bench.results_io import command_line, save
from tests.digest.docgen import check, document
from worker.digest.prepared import PrepareOptions, prepare

SHARED = Path(__file__).resolve().parents[2] / "shared"
OPTIONS = PrepareOptions(highlights=8, compaction=True, min_saving=0.0, render=True)


def pool(shared: Path) -> list[str]:
    lines = [json.loads(r)["line"] for r in (shared / "formats" / "formats.jsonl").read_text().splitlines() if r]
    for log in sorted((shared / "devlogs" / "loghub").glob("*/*_2k.log")):
        lines += log.read_text(errors="surrogateescape").splitlines()[:400]
    return lines


GROWTH_UNITS = ["(", '"', "<1>", "k=v ", "[x] ", "a:b ", "AKIA", "ghp_", "password=", "eyJhbGciOi", "{\"a\":", "1.2.3.4 ",
                "Jan 1 ", "at a.b(C.java:1) ", "0x1f ", "ERROR ", "\\", "=", "-", ":", " ", "a"]
GROWTH_HEADS = ["", "2031-01-01T00:00:00Z host app[1]: ", "<13>Jan  1 00:00:00 h p: ", "ERROR "]


def growth() -> dict:
    """Per unit: the pass's CPU seconds on a line of it repeated, the worst after any head, and the worst ratio."""
    out = {}
    for unit in GROWTH_UNITS:
        worst = None
        for head in GROWTH_HEADS:
            secs = []
            for n in (16_000, 64_000, 256_000):
                text = head + unit * (n // len(unit))
                t0 = time.thread_time()
                prepare(text, None, None, OPTIONS)
                secs.append(time.thread_time() - t0)
            ratio = max(secs[1] / max(secs[0], 1e-3), secs[2] / max(secs[1], 1e-3))
            if worst is None or ratio > worst["ratio"]:
                worst = {"head": head, "seconds": [round(x, 3) for x in secs], "ratio": round(ratio, 2)}
        out[unit] = worst
    return out


class Slow(Exception):
    pass


def _alarm(*_):
    raise Slow


def where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/worker/" in f.filename] or \
        traceback.extract_tb(exc.__traceback__)
    f = frames[-1]
    return f"{f.filename.split('/worker/')[-1]}:{f.lineno} {f.name}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slow", type=float, default=2.0)
    ap.add_argument("--keep", type=Path, default=Path("/tmp/digest_fuzz"))
    ap.add_argument("--out", default="bench/results/digest_fuzz_cpu.json")
    ap.add_argument("--growth", action="store_true")
    a = ap.parse_args()
    a.keep.mkdir(parents=True, exist_ok=True)
    lines = pool(SHARED)
    signal.signal(signal.SIGALRM, _alarm)
    found: dict[str, dict] = {}
    start = time.monotonic()
    end, seed, worst, size = start + a.seconds, a.seed, (0.0, 0), 0
    while time.monotonic() < end:
        text = document(random.Random(seed), lines)
        size += len(text)
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, a.slow + len(text) / 1e6)   # slower than 1 MB/s past the first --slow s
        try:
            check(text, prepare(text, None, None, OPTIONS))
            key = None
        except Slow:
            key = "slow"
        except Exception as exc:  # noqa: BLE001 - every failure is counted and kept
            key = f"{type(exc).__name__} at {where(exc)}"
            if isinstance(exc, AssertionError):
                key = f"invariant: {str(exc).splitlines()[0][:80]}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        worst = max(worst, (time.monotonic() - t0, seed))
        if key is not None:
            f = found.setdefault(key, {"count": 0, "seed": seed})
            f["count"] += 1
            if f["count"] == 1:
                (a.keep / f"{seed}.txt").write_text(text, errors="surrogatepass")
                print(json.dumps({"new": key, "seed": seed}), flush=True)
        seed += 1
    save(a.out, {"command": command_line("bench.digest_fuzz", None), "seeds": [a.seed, seed - 1],
                 "seconds": round(time.monotonic() - start, 1), "documents": seed - a.seed, "characters": size,
                 "pool_lines": len(lines), "failures": found,
                 "slowest": {"seconds": round(worst[0], 3), "seed": worst[1]},
                 "growth": growth() if a.growth else None})


if __name__ == "__main__":
    main()
