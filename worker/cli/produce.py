"""`ribbon produce`: send documents from a file to a topic."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
from tqdm import tqdm

from worker.errors import RibbonError
from worker.kafka.clients import producer as make_producer

_SPLIT = re.compile(r"^(jsonl|blank|lines:(\d+))$")


class SplitError(RibbonError, ValueError):
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


@dataclass(frozen=True)
class LineKey:
    """The key of each line's record (`ribbon produce --lines`): a constant, a JSON field or a regex group."""

    constant: str | None = None
    field: str | None = None     # dotted path into a JSON line
    regex: str | None = None     # first group (or group 'key') of a match on the line

    def of(self, line: bytes) -> bytes | None:
        if self.field is not None and line.lstrip().startswith(b"{"):
            try:
                v = orjson.loads(line)
            except orjson.JSONDecodeError:
                v = None
            for part in self.field.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            if v is not None:
                return (v if isinstance(v, str) else orjson.dumps(v).decode()).encode()
        if self.regex is not None:
            m = re.search(self.regex, line.decode("utf-8", "replace"))
            if m is not None:
                k = m.groupdict().get("key") or (m.group(1) if m.re.groups else m.group(0))
                return k.encode()
        return self.constant.encode() if self.constant is not None else None


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for raw in fh if raw.strip())


def lines(path: Path, key: LineKey) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) per non-empty line of `path`, the line sent as it is (one record per line). With a key
    field or regex, a line in which it finds no key (a stack frame, a wrapped message: a line without the
    header the regex reads) takes the key of the line before it, so a multiline event stays in one window;
    before any line had one, the constant key (or none)."""
    found = LineKey(field=key.field, regex=key.regex)
    previous: bytes | None = None
    with open(path, "rb") as fh:
        for raw in fh:
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            k = found.of(line) if key.field is not None or key.regex is not None else None
            if k is not None:
                previous = k
            yield (k or previous or key.of(line)), line


def produce_file(path: Path, *, topic: str, producer_conf: dict, split: Split, source: str | None = None,
                 progress: bool = True, line_key: LineKey | None = None, rate: float | None = None) -> int:
    """Produce every document of `path` (with `line_key`: every line, as one record keyed by it, at `rate`
    records per second when given); returns how many were acknowledged. Raises on any failure.

    `producer_conf` comes from worker.kafka.config (ClientConfig.tool_producer): address, security
    settings and kafka.producer_extra included."""
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
    records = lines(path, line_key) if line_key is not None else ((None, v) for v in documents(path, split, source))
    total = None
    if progress:  # one cheap pass first: the bar has a total
        total = _count_lines(path) if line_key is not None else count_documents(path, split)
    start = time.monotonic()
    with tqdm(total=total, desc=f"produce {topic}", unit="doc", disable=not progress) as bar:
        for key, value in records:
            if rate:
                time.sleep(max(0.0, start + sent / rate - time.monotonic()))
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
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
