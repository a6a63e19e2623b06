"""`ribbon tail`: the summaries (or dead letters) on their topic, one readable block each.

The consumer is built from the same settings as the worker's clients (worker/kafka/config.py:
address, SASL and TLS, `kafka.consumer_extra`), joins no group and commits nothing: it is assigned
every partition of the topic and reads committed records only (the worker's outputs are
transactional). librdkafka decompresses every codec the worker may use (zstd by default) itself.
Without `--follow` it stops at the end of every partition; with it, it waits for more until Ctrl-C.
`--last N` starts at each partition's last N records, counted as records: transaction markers and
aborted records take offsets but are none, so the start is found by reading back from the end.
"""

from __future__ import annotations

import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import orjson
import pydantic
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from worker.kafka.clients import consumer as make_consumer
from worker.kafka.config import ClientConfig
from worker.kafka.headers import parse_dead_letter_headers
from worker.messages.levels import RANK

WIDTH = 100


@dataclass(frozen=True)
class TailOptions:
    topic: str
    dead_letters: bool = False
    follow: bool = False
    key: str | None = None
    min_severity: str | None = None   # one of levels.ORDER: only summaries whose digest counts a line this severe
    as_json: bool = False
    last: int | None = None           # start at each partition's last this many records (None: the beginning)
    limit: int | None = None          # stop after printing this many
    timeout_s: float = 10.0           # metadata lookup


def records(config: ClientConfig, opts: TailOptions, stop: Callable[[], bool] = lambda: False) -> Iterator[Any]:
    """The topic's records, every partition, in each partition's order (until the end unless following)."""
    c = make_consumer(config.tool_consumer(f"ribbon-tail-{uuid.uuid4().hex[:12]}", **{
        "isolation.level": "read_committed", "enable.partition.eof": True}))
    try:
        meta = c.list_topics(opts.topic, timeout=opts.timeout_s).topics.get(opts.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise LookupError(f"topic {opts.topic!r} not found")
        tps = [TopicPartition(opts.topic, p, OFFSET_BEGINNING if opts.last is None else OFFSET_END)
               for p in sorted(meta.partitions)]
        if opts.last is not None:
            for tp in tps:
                tp.offset = start_of_last(c, tp, opts.last, opts.timeout_s)
        c.assign(tps)
        open_parts = {tp.partition for tp in tps}
        while not stop() and (opts.follow or open_parts):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(m.partition())
                    continue
                raise RuntimeError(str(m.error()))
            yield m
    finally:
        c.close()


def start_of_last(c, tp: TopicPartition, n: int, timeout_s: float) -> int:
    """The offset of the first of the partition's last `n` records (its low mark when it holds fewer).

    Offsets are not records: a transaction's marker takes one, and an aborted transaction's records
    take theirs, yet read_committed delivers neither. So windows are read back from the end, each
    twice as long as the one after it, until they hold `n` records or reach the low mark."""
    low, high = c.get_watermark_offsets(tp, timeout=timeout_s)
    seen: list[int] = []  # offsets of the records in [start, high), ascending
    end, span = high, max(1, n)
    while end > low:
        start = max(low, end - span)
        seen = _offsets_in(c, tp.topic, tp.partition, start, end, timeout_s) + seen
        if len(seen) >= n:
            return seen[-n]
        end, span = start, 2 * span
    return low


def _offsets_in(c, topic: str, partition: int, start: int, end: int, timeout_s: float) -> list[int]:
    """The offsets of the records read_committed delivers in [start, end) of one partition."""
    c.assign([TopicPartition(topic, partition, start)])
    out: list[int] = []
    deadline = time.monotonic() + timeout_s  # without a record for this long, the broker is not answering
    while True:
        m = c.poll(0.5)
        if m is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no record from {topic}/{partition} at offset {start} within {timeout_s:.0f} s")
            continue
        if m.error() is not None:
            if m.error().code() == KafkaError._PARTITION_EOF:
                return out
            raise RuntimeError(str(m.error()))
        if m.offset() >= end:
            return out
        out.append(m.offset())
        deadline = time.monotonic() + timeout_s


def tail(config: ClientConfig, opts: TailOptions, out: TextIO | None = None,
         stop: Callable[[], bool] = lambda: False) -> int:
    """Print the records that pass the filters (to `out`, default stdout); returns how many were printed."""
    out = sys.stdout if out is None else out
    printed = 0
    for m in records(config, opts, stop):
        if opts.key is not None and (m.key() or b"").decode("utf-8", "replace") != opts.key:
            continue
        text = (dead_letter_block if opts.dead_letters else summary_block)(m, opts)
        if text is None:
            continue
        out.write(text + "\n")
        out.flush()
        printed += 1
        if opts.limit is not None and printed >= opts.limit:
            break
    return printed


def severe_enough(summary: dict, least: str | None) -> bool:
    if least is None:
        return True
    worst = RANK[least]
    counts = (summary.get("digest") or {}).get("severity") or {}
    return any(n > 0 and lv in RANK and RANK[lv] <= worst for lv, n in counts.items())


def summary_block(m: Any, opts: TailOptions) -> str | None:
    try:
        s = orjson.loads(m.value() or b"")
    except orjson.JSONDecodeError:
        s = None
    if not isinstance(s, dict):
        return None if opts.min_severity else _raw_block(m, "not a Ribbon summary")
    if not severe_enough(s, opts.min_severity):
        return None
    if opts.as_json:
        return orjson.dumps(s).decode()
    return "\n".join(_summary_lines(m, s))


def _summary_lines(m: Any, s: dict) -> Iterator[str]:
    key = (m.key() or b"").decode("utf-8", "replace")
    w, d = s.get("window"), s.get("digest") or {}
    span = (f"{w.get('start') or '-'} .. {w.get('end') or '-'}, {w.get('records')} records, closed by "
            f"{w.get('closed_by')}") if w else _digest_span(d)
    yield f"== {key or s.get('id')}  [{s.get('source') or '-'}]  {m.topic()}/{m.partition()}@{m.offset()}"
    text, published = _summary_text(s.get("summary"))
    yield f"   {span}  |  {s.get('mode')}: {s.get('model')}" + (f"  |  {published}" if published else "")
    sev = ", ".join(f"{lv} {n}" for lv, n in sorted((d.get("severity") or {}).items(),
                                                     key=lambda kv: RANK.get(kv[0], len(RANK))))
    yield f"   {d.get('lines', 0)} lines" + (f": {sev}" if sev else "")
    for para in text.splitlines() or [""]:
        yield textwrap.fill(para, WIDTH, initial_indent="   ", subsequent_indent="   ") if para else ""
    for h in s.get("highlights") or []:
        yield "   > " + textwrap.shorten(str(h), WIDTH - 5, placeholder=" ...")
    yield ""


def _summary_text(summary: Any) -> tuple[str, str]:
    """The summary's text and which text was published and why (schema 5: {text, source, reason}; a plain
    string from an older schema has neither)."""
    if isinstance(summary, dict):
        source, reason = summary.get("source"), summary.get("reason")
        published = f"summary from the {source}" + (f" ({reason})" if reason else "") if source else ""
        return str(summary.get("text") or ""), published
    return str(summary or ""), ""


def _digest_span(d: dict) -> str:
    span = d.get("span")
    return f"{span['first']} .. {span['last']}" if isinstance(span, dict) else "no times"


def dead_letter_block(m: Any, opts: TailOptions) -> str | None:
    value = m.value()
    if opts.as_json:
        headers = {k: (v or b"").decode("utf-8", "replace") for k, v in (m.headers() or [])}
        return orjson.dumps({"key": (m.key() or b"").decode("utf-8", "replace"), "headers": headers,
                             "value": None if value is None else value.decode("utf-8", "replace"),
                             "offset": m.offset(), "partition": m.partition()}).decode()
    try:
        h = parse_dead_letter_headers(m.headers() or ())
    except pydantic.ValidationError:
        return _raw_block(m, "not a Ribbon dead letter (its headers: docs/messages.md)")
    return _raw_block(m, f"{h.error_class}: {h.error_message} (from {h.source_topic}/{h.source_partition}"
                         f"@{h.source_offset})")


def _raw_block(m: Any, reason: str) -> str:
    value = m.value()
    shown = "(no value)" if value is None else textwrap.shorten(value.decode("utf-8", "replace"), WIDTH * 3,
                                                                 placeholder=" ...")
    key = (m.key() or b"").decode("utf-8", "replace")
    return f"== {key or '-'}  {m.topic()}/{m.partition()}@{m.offset()}\n   {reason}\n   {shown}\n"
