"""Record headers, every rule in one place: what travels, what Ribbon writes, what it reads back.

- Every input header is carried, byte for byte and in order, to the output
  record and to a dead letter: a W3C `traceparent` / `tracestate` continues
  the trace, and an operator's own headers survive a replay.
- Output records then get `source.topic`, `source.partition`, `source.offset`
  (UTF-8), the same names a dead letter carries. Input headers of those names,
  or of Ribbon's dead-letter headers, are dropped first (`RESERVED`): nobody
  upstream can pose as the source coordinates or the error of a record.
- A dead letter carries `error.class`, `error.message` (at most
  MAX_HEADER_MESSAGE_BYTES), the source coordinates and `worker.version`
  (`DeadLetterHeaders`, the schema `python -m worker.cli.schemas` writes); one whose record
  the broker refused says so in `error.value_dropped` (and
  `error.headers_dropped` when the input's headers were left off).
- A replayed dead letter goes back to its input topic without Ribbon's
  headers and with `ribbon.replay.source` naming where it came from.
- A window's document keeps its records' headers without their trace context
  (`TRACE_HEADERS`: each record has its own; the document's span links them).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from worker.messages.models import ERROR_CLASSES, BadMessage

Header = tuple[str, "bytes | None"]

ERROR_CLASS, ERROR_MESSAGE, WORKER_VERSION = "error.class", "error.message", "worker.version"
SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET = "source.topic", "source.partition", "source.offset"
SOURCE_HEADERS = (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET)
VALUE_DROPPED, HEADERS_DROPPED = "error.value_dropped", "error.headers_dropped"
RESERVED = frozenset({*SOURCE_HEADERS, ERROR_CLASS, ERROR_MESSAGE, WORKER_VERSION, VALUE_DROPPED, HEADERS_DROPPED})
REPLAY_SOURCE = "ribbon.replay.source"  # on a replayed dead letter: `dlq_topic:partition:offset`
TRACEPARENT = "traceparent"
TRACE_HEADERS = (TRACEPARENT, "tracestate")
MAX_HEADER_MESSAGE_BYTES = 1024


class DeadLetterHeaders(BaseModel):
    """Headers of a dead-letter record; its value is the original input bytes and its key the input key."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, title="Ribbon dead-letter headers",
        json_schema_extra={"description": "Kafka headers of a record on the dead-letter topic; every value is "
                                          "UTF-8 text. The record value is the original input, byte for byte."},
    )

    error_class: str = Field(alias=ERROR_CLASS, pattern=r"^[a-z][a-z0-9_]*$", examples=list(ERROR_CLASSES))
    error_message: str = Field(alias=ERROR_MESSAGE, description="human reason, at most 1024 bytes")
    source_topic: str = Field(alias=SOURCE_TOPIC, min_length=1)
    source_partition: str = Field(alias=SOURCE_PARTITION, pattern=r"^(0|[1-9][0-9]*)$")
    source_offset: str = Field(alias=SOURCE_OFFSET, pattern=r"^(0|[1-9][0-9]*)$")
    worker_version: str = Field(alias=WORKER_VERSION, min_length=1)


def carried(headers: Iterable[Header] | None) -> tuple[Header, ...]:
    """The input headers that travel on (all but Ribbon's reserved names)."""
    return tuple((k, v) for k, v in (headers or ()) if k not in RESERVED)


def output_headers(headers: Iterable[Header] | None, topic: str, partition: int, offset: int) -> tuple[Header, ...]:
    return (*carried(headers), (SOURCE_TOPIC, topic.encode()), (SOURCE_PARTITION, str(partition).encode()),
            (SOURCE_OFFSET, str(offset).encode()))


def dead_letter_headers(err: BadMessage, *, topic: str, partition: int, offset: int,
                        worker_version: str) -> list[tuple[str, bytes]]:
    """Ribbon's headers of a dead letter (validated by DeadLetterHeaders; the message cut to its bound)."""
    message = err.message.encode()[:MAX_HEADER_MESSAGE_BYTES].decode("utf-8", "ignore")
    headers = DeadLetterHeaders.model_validate({
        ERROR_CLASS: err.error_class, ERROR_MESSAGE: message, SOURCE_TOPIC: topic,
        SOURCE_PARTITION: str(partition), SOURCE_OFFSET: str(offset), WORKER_VERSION: worker_version,
    })
    return [(k, str(v).encode()) for k, v in headers.model_dump(by_alias=True).items()]


def dead_letter_headers_with_input(headers: Iterable[Header] | None,
                                   ribbon: Iterable[tuple[str, bytes]]) -> tuple[Header, ...]:
    return (*carried(headers), *ribbon)


def parse_dead_letter_headers(headers: Iterable[Header]) -> DeadLetterHeaders:
    """The Ribbon headers of a dead-letter record (others are ignored); ValidationError if any is missing."""
    names = {f.alias for f in DeadLetterHeaders.model_fields.values()}
    values = {k: (v or b"").decode("utf-8", "replace") for k, v in headers if k in names}
    return DeadLetterHeaders.model_validate(values)


def ribbon_values(headers: Iterable[Header] | None) -> dict[str, str]:
    """Ribbon's own headers of a record (RESERVED names), decoded: a reader's view, missing ones absent."""
    return {k: (v or b"").decode("utf-8", "replace") for k, v in (headers or ()) if k in RESERVED}


def replayed(headers: Iterable[Header] | None, dlq_topic: str, partition: int, offset: int) -> list[Header]:
    """A dead letter's headers as it goes back to its input topic: its carried ones, and where it came from."""
    return [*carried(headers), (REPLAY_SOURCE, f"{dlq_topic}:{partition}:{offset}".encode())]


def without_trace(headers: Iterable[Header] | None) -> list[Header]:
    """A record's headers without its trace context (each record has its own), as (name, value) pairs."""
    return [(k, v) for k, v in headers or () if k not in TRACE_HEADERS]


def trace_parent(headers: Iterable[Header] | None) -> bytes | None:
    """The record's `traceparent` value, or None."""
    return next((v for k, v in headers or () if k == TRACEPARENT and v), None)
