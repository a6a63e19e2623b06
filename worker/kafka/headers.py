"""Record headers: the input's travel to the output (and to dead letters); outputs say where they came from.

- Every input header is carried, byte for byte and in order, to the output
  record and to a dead letter: a W3C `traceparent` / `tracestate` continues
  the trace, and an operator's own headers survive a replay.
- Output records then get `source.topic`, `source.partition`, `source.offset`
  (UTF-8), the same names a dead letter carries. Input headers of those names,
  or of Ribbon's dead-letter headers, are dropped first: nobody upstream can
  pose as the source coordinates or the error of a record.
"""

from __future__ import annotations

from collections.abc import Iterable

Header = tuple[str, "bytes | None"]

SOURCE_HEADERS = ("source.topic", "source.partition", "source.offset")
RESERVED = frozenset({*SOURCE_HEADERS, "error.class", "error.message", "worker.version", "error.value_dropped",
                      "error.headers_dropped"})


def carried(headers: Iterable[Header] | None) -> tuple[Header, ...]:
    """The input headers that travel on (all but Ribbon's reserved names)."""
    return tuple((k, v) for k, v in (headers or ()) if k not in RESERVED)


def output_headers(headers: Iterable[Header] | None, topic: str, partition: int, offset: int) -> tuple[Header, ...]:
    return (*carried(headers), ("source.topic", topic.encode()), ("source.partition", str(partition).encode()),
            ("source.offset", str(offset).encode()))


def dead_letter_headers_with_input(headers: Iterable[Header] | None,
                                   ribbon: Iterable[tuple[str, bytes]]) -> tuple[Header, ...]:
    return (*carried(headers), *ribbon)
