"""Cost of decode_input / encode_output per message on the ingest and delivery threads.

    .venv/bin/python -m bench.messages [--n 20000] [--out bench/results/messages_cpu.json]

Prints messages/s and MB/s for JSON-object, lines and plain-text inputs of a few
sizes, and outputs/s for encode_output; writes the same figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path
from typing import Any, Callable

import orjson

from worker.messages.models import OutputMessage, decode_input, encode_output


def _log_lines(rng: random.Random, n_bytes: int) -> list[str]:
    lines, size = [], 0
    while size < n_bytes:
        line = (f"2026-12-02T10:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z gnb-{rng.randrange(999):03d} "
                f"ERROR S1AP link {rng.randrange(16)} lost sync, retry {rng.randrange(9)} "
                f"cause=0x{rng.getrandbits(16):04x}")
        lines.append(line)
        size += len(line) + 1
    return lines


def _time(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=Path("bench/results/messages_cpu.json"))
    args = parser.parse_args()
    rng = random.Random(0)
    rows = []
    for size in (256, 4_096, 65_536):
        lines = _log_lines(rng, size)
        text = "\n".join(lines)
        for form, value in (("json_text", orjson.dumps({"text": text, "source": "gnb-1/oam", "kind": "log"})),
                            ("json_lines", orjson.dumps({"lines": lines, "kind": "log"})),
                            ("plain", text.encode())):
            n = max(200, args.n * 256 // size)
            seconds = _time(lambda v=value: decode_input(v, max_bytes=4_000_000), n)
            rows.append({"op": "decode_input", "form": form, "bytes": len(value), "n": n,
                         "msgs_per_s": n / seconds, "mb_per_s": n * len(value) / seconds / 1e6,
                         "us_per_msg": seconds / n * 1e6})
    out_msg = OutputMessage.model_validate(dict(
        id="in:3:1234", source="gnb-017/oam", kind="log", attributes={"site": "paris-3"},
        input={"topic": "in", "partition": 3, "offset": 1234}, summary="S1AP link 3 lost sync; likely transport.",
        highlights=["line a", "line b", "line c"], mode="generative", model="Qwen/Qwen2.5-0.5B-Instruct",
        tokens={"input": 900, "output": 60, "chunks": 1}, timing_ms={"queued": 12.5, "gpu": 80.0, "total": 101.0},
    ))
    seconds = _time(lambda: encode_output(out_msg), args.n)
    rows.append({"op": "encode_output", "form": "typical", "bytes": len(encode_output(out_msg)), "n": args.n,
                 "msgs_per_s": args.n / seconds, "us_per_msg": seconds / args.n * 1e6})
    for r in rows:
        mb = f"{r['mb_per_s']:8.1f} MB/s" if "mb_per_s" in r else " " * 13
        print(f"{r['op']:14s} {r['form']:10s} {r['bytes']:7d} B  {r['msgs_per_s']:10.0f} msg/s {mb} "
              f"{r['us_per_msg']:8.1f} us/msg")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                                    "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
