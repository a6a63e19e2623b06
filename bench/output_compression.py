"""compression.type for the worker's producer: bytes on the wire and CPU, per codec, on real outputs.

Two kinds of output, built in this process by the worker's own code (digest mode: digest,
highlights, rendering, worker/pipeline/outputs.py):
- documents: one output per multi-line document (worker.demo.samples.mixed_corpus), the default input;
- windows: one output per host window of one-line syslog records (worker/demo/lines.py,
  `--hosts` hosts, `--window-records` records per host window).
Each set is produced through librdkafka to the embedded broker once per codec, in bursts of
`--burst` records (about one delivery transaction), flushed between bursts. Bytes are the
producer's tx_bytes statistic (payload plus request framing); CPU is this process's CPU time over
the produce calls and flushes (librdkafka compresses on its own threads, counted here).

    python -m bench.output_compression     # bench/results/output_compression_cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import orjson

from bench.results_io import RESULTS, save
from bench.windows import wire_bytes
from worker.pipeline.configs import finishing_config, ingest_config
from worker.config.settings import load_settings
from worker.demo.lines import syslog_stream
from worker.demo.samples import mixed_corpus
from worker.kafka.broker import EmbeddedBroker
from worker.messages.models import encode_output
from worker.pipeline.inflight import Doc
from worker.pipeline.lines import LineStream
from worker.pipeline.outputs import build_output
from worker.pipeline.tracker import OffsetTracker

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def document_outputs(n: int) -> tuple[list[bytes], list[bytes], int]:
    s = load_settings(environ={})
    s = s.model_copy(update={"model": s.model.model_copy(update={"mode": "digest"})})
    values, keys, raw = [], [], 0
    for i, d in enumerate(mixed_corpus(n, seed=11)):
        text = "\n".join(d["lines"])
        raw += len(orjson.dumps(d))
        meta = {"id": d["id"], "source": d.get("source"), "kind": d.get("kind"), "attributes": None}
        doc = Doc(("in", i % 8), 1, i, None, d["id"], text, meta, time.monotonic())
        values.append(encode_output(build_output(doc, "", config=finishing_config(s, "digest"), now=time.monotonic())))
        keys.append(d["id"].encode())
    return values, keys, raw


def window_outputs(hosts: int, per_window: int) -> tuple[list[bytes], list[bytes], int]:
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_MODEL__MODE": "digest",
                               "RIBBON_WINDOWING__MAX_LINES": str(per_window)})
    tracker = OffsetTracker()
    tp = ("in", 0)
    epoch = tracker.assign(tp)
    lines = LineStream(ingest_config(s, None), tracker=tracker, dead_letter=lambda *a: None)
    docs, raw = [], 0
    for off, (host, line) in enumerate(syslog_stream(hosts * per_window * 4, hosts, seed=3)):
        tracker.see(tp, epoch, off)
        raw += len(line)
        docs += lines.add(_Msg(host, line, off), tp, epoch)
    values = [encode_output(build_output(d, "", config=finishing_config(s, "digest"), now=time.monotonic()))
              for d in docs]
    covered = sum(d.window.records for d in docs)
    return values, [d.key for d in docs], int(raw * covered / (hosts * per_window * 4))


class _Msg:
    """The parts of a consumed message that LineStream reads."""

    def __init__(self, key: str, line: str, offset: int) -> None:
        self._k, self._v, self._o = key.encode(), line.encode(), offset

    def key(self):
        return self._k

    def value(self):
        return self._v

    def offset(self):
        return self._o

    def timestamp(self):
        return (1, 1_700_000_000_000 + self._o)

    def headers(self):
        return None


def measure(bootstrap: str, broker, name: str, values, keys, raw: int, burst: int) -> dict:
    topic = f"oc-{name}-{time.time_ns()}"
    broker.create_topics({topic: 6})
    bursts = [burst] * (len(values) // burst) + ([len(values) % burst] if len(values) % burst else [])
    out = {"outputs": len(values), "input_bytes": raw, "output_bytes": sum(len(v) for v in values), "codecs": {}}
    for codec in CODECS:
        wire, cpu = wire_bytes(bootstrap, topic, values, keys, bursts, codec)
        out["codecs"][codec] = {"wire_bytes": wire, "ratio_vs_raw_output": round(out["output_bytes"] / wire, 2),
                                "wire_over_input": round(wire / raw, 4),
                                "cpu_ms_per_mb": round(cpu * 1e3 / (out["output_bytes"] / 1e6), 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--window-records", type=int, default=200)
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--out", default=str(RESULTS / "output_compression_cpu.json"))
    args = ap.parse_args(argv)

    result = {"benchmark": "output_compression", "machine": platform.node(), "settings": vars(args).copy()}
    with EmbeddedBroker() as broker:
        result["documents"] = measure(broker.bootstrap, broker, "docs", *document_outputs(args.documents), args.burst)
        result["windows"] = measure(broker.bootstrap, broker, "windows",
                                    *window_outputs(args.hosts, args.window_records), args.burst)
    result["method"] = ("outputs built by the worker's code in digest mode, produced through librdkafka per codec "
                        "in bursts flushed between; wire bytes = tx_bytes; CPU = process time over produce+flush")
    print(json.dumps(result, indent=2))
    save(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
