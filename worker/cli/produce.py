"""`ribbon produce`: send documents from a file to a topic."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

_SPLIT = re.compile(r"^(jsonl|blank|lines:(\d+))$")


class SplitError(ValueError):
    pass


@dataclass(frozen=True)
class Split:
    mode: str  # "jsonl" | "blank" | "lines"
    n: int = 0

    @classmethod
    def parse(cls, spec: str) -> Split:
        m = _SPLIT.match(spec)
        if not m or (m.group(2) is not None and int(m.group(2)) < 1):
            raise SplitError(f"--split must be jsonl, blank or lines:N with N >= 1, got {spec!r}")
        return cls("lines", int(m.group(2))) if m.group(2) else cls(spec)


def documents(path: Path, split: Split, source: str | None = None) -> Iterator[bytes]:
    """Yield message values: JSONL lines as they are, other splits as {"text": ...} objects."""
    with open(path, "rb") as fh:
        if split.mode == "jsonl":
            for line in fh:
                if line.strip():
                    yield line.rstrip(b"\r\n")
            return
        block: list[str] = []
        for raw in fh:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if split.mode == "blank":
                if line.strip():
                    block.append(line)
                    continue
                if block:
                    yield _as_json(block, source)
                    block = []
            else:
                block.append(line)
                if len(block) == split.n:
                    yield _as_json(block, source)
                    block = []
        if block:
            yield _as_json(block, source)


def count_documents(path: Path, split: Split) -> int:
    """How many documents `documents(path, split)` yields (a pass that builds no JSON)."""
    with open(path, "rb") as fh:
        if split.mode == "jsonl":
            return sum(1 for line in fh if line.strip())
        if split.mode == "lines":
            n = sum(1 for _ in fh)
            return -(-n // split.n)
        blocks, inside = 0, False
        for raw in fh:
            if raw.strip():
                blocks += not inside
                inside = True
            else:
                inside = False
        return blocks


def _as_json(lines: list[str], source: str | None) -> bytes:
    doc: dict[str, object] = {"text": "\n".join(lines)}
    if source:
        doc["source"] = source
    return orjson.dumps(doc)


def produce_file(path: Path, *, topic: str, producer_conf: dict, split: Split, source: str | None = None,
                 progress: bool = True) -> int:
    """Produce every document of `path`; returns how many were acknowledged. Raises on any failure.

    `producer_conf` comes from worker.kafka.config (ClientConfig.tool_producer): address, security
    settings and kafka.producer_extra included."""
    from tqdm import tqdm

    from worker.kafka.clients import producer as make_producer

    producer = make_producer(producer_conf)
    acked = 0
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(str(err))

    sent = 0
    total = count_documents(path, split) if progress else None  # one cheap pass first: the bar has a total
    with tqdm(total=total, desc=f"produce {topic}", unit="doc", disable=not progress) as bar:
        for value in documents(path, split, source):
            while True:
                try:
                    producer.produce(topic, value=value, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.1)
            sent += 1
            producer.poll(0)
            bar.update(1)
        deadline = time.monotonic() + 60
        while producer.flush(1.0) > 0 and time.monotonic() < deadline:
            pass
    if errors or acked != sent:
        raise RuntimeError(f"{sent - acked} of {sent} documents not acknowledged; first error: "
                           f"{errors[0] if errors else 'flush timed out'}")
    return acked
