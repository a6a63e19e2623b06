"""The ingest thread's per-record path on a windowed backlog alone: no broker, no model, no digest.

    python -m bench.windows_ingest --records 100000 --repeats 7

`--records` one-line syslog records from `--hosts` hosts (worker/demo/lines.py), keyed by host, as
confluent_kafka Messages of `--partitions` partitions, go through the ingest stage's decoding
(worker/pipeline/source.py `Source.documents`, the window stream, the offset tracker, the metrics) in
polls as ingest takes them (pipeline.poll_batch records of a partition at a time, LINE_POLLS polls'
worth per call); the stream's end closes the last windows. The CPU seconds of those calls, per record:
the least and the median of `--repeats` runs. `python -m bench.windows_pair --stage ingest` runs it for
this tree and for `main` side by side.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import zlib

from confluent_kafka import Message

from bench.results_io import RESULTS, command_line, machine_name, save
from worker.config.settings import load_settings
from worker.demo.lines import syslog_stream
from worker.observability.metrics import Metrics
from worker.pipeline.configs import ingest_config
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.lines import LineStream
from worker.pipeline.source import LINE_POLLS, Source
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker

TOPIC = "lines"


class _Wake:
    def set(self) -> None:
        """Delivery's wake-up: nobody waits here."""


def polls(args, batch: int) -> list[list[Message]]:
    """The backlog as ingest's calls: per call, up to LINE_POLLS polls of `batch` records of one partition each."""
    parts: list[list[Message]] = [[] for _ in range(args.partitions)]
    now_ms = int(time.time() * 1e3)
    for host, line in syslog_stream(args.records, args.hosts, seed=args.seed, rate=args.rate):
        p = zlib.crc32(host.encode()) % args.partitions
        parts[p].append(Message(topic=TOPIC, partition=p, offset=len(parts[p]), key=host.encode(),
                                value=line.encode(), timestamp=(1, now_ms)))
    chunks = [part[i:i + batch] for i in range(0, max(map(len, parts)), batch) for part in parts if part[i:i + batch]]
    return [[m for c in chunks[i:i + LINE_POLLS] for m in c] for i in range(0, len(chunks), LINE_POLLS)]


def one_run(settings, calls: list[list[Message]], partitions: int) -> tuple[float, int]:
    """CPU seconds of ingest's calls over the backlog (fresh tracker, metrics and windows); windows closed."""
    config = ingest_config(settings, None)
    tracker, metrics = OffsetTracker(), Metrics()
    dead = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=_Wake())
    lines = LineStream(config, tracker=tracker, dead_letter=dead.send, metrics=metrics)
    source = Source(config, Shared(tracker, DocRegistry(), metrics, dead), lines, Guard(dead, metrics))
    for p in range(partitions):
        tracker.assign((TOPIC, p))
    windows = 0
    t0 = time.process_time()
    for msgs in calls:
        windows += len(source.documents(msgs))
    windows += len(lines.due(True))
    return time.process_time() - t0, windows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=2_000.0, help="records/s the records' stamps say")
    ap.add_argument("--max-lines", type=int, default=400, help="windowing.max_lines")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "windows-ingest-run_cpu.json"))
    args = ap.parse_args(argv)
    if min(args.records, args.hosts, args.partitions, args.repeats, args.max_lines) < 1:
        print("--records, --hosts, --partitions, --repeats and --max-lines must be >= 1", file=sys.stderr)
        return 2
    settings = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": TOPIC,
                                      "RIBBON_WINDOWING__MAX_LINES": str(args.max_lines)})
    calls = polls(args, settings.pipeline.poll_batch)
    runs = [one_run(settings, calls, args.partitions) for _ in range(args.repeats)]
    cpu = [c for c, _ in runs]
    per = {"least": min(cpu), "median": statistics.median(cpu)}
    result = {"benchmark": "windows-ingest", "machine": machine_name("cpu"),
              "cpu": platform.processor() or platform.machine(),
              "settings": {k: getattr(args, k) for k in ("records", "hosts", "partitions", "rate", "max_lines",
                                                         "repeats", "seed")},
              "windows": runs[0][1], "cpu_s": [round(c, 4) for c in cpu],
              "us_per_record": {k: round(1e6 * v / args.records, 3) for k, v in per.items()},
              "records_per_cpu_s": {k: round(args.records / v) for k, v in per.items()},
              "command": command_line("bench.windows_ingest", argv)}
    save(args.out, result)
    print(f"{args.records:,} records, {result['windows']} windows: {result['us_per_record']['least']:.2f} us of "
          f"CPU per record at least, {result['us_per_record']['median']:.2f} median "
          f"({result['records_per_cpu_s']['least']:,} records per CPU second)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
