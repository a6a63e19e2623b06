"""The one dead-letter function of the worker: every stage routes bad input here.

Ingest (undecodable or invalid input, oversize plans, chunking that does not
converge), the GPU loop's failures (through finishing) and finishing itself
(a document whose output cannot be built) all call `DeadLetters.send`. It
completes the input offset with a record for the dead-letter topic: the
original bytes (redacted only with redaction.dead_letters: docs/digest.md),
the input's own headers, and Ribbon's reason headers (`error.class`,
`error.message` with any secret in it redacted, `source.*`, `worker.version`). The record then
goes out with the offset like any summary: committed, never lost, in order.

A large value (kafka.dead_letter_spill_bytes or more) waits for its commit on
disk, not in memory (worker/pipeline/spill.py): a dead letter is final, but it
commits in order behind whatever its partition still processes.

A record the broker refuses (too large: its value, key or headers; or invalid)
is replaced here too (`refused`): a dead letter sure to fit, with no value, no
key, the input's headers only when they are small, and Ribbon's headers (the
coordinates, `error.class`, `error.message`, `worker.version`). When even that
is refused, `skipped` logs the offset at ERROR and counts it
(`ribbon_skipped_records_total`): its offset commits with nothing produced, so
one record never stops its partition.

Thread-safe (the tracker and the spool are); never blocks beyond their locks
(and one file write for a spilled value).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from worker import __version__
from worker.kafka.headers import (ERROR_CLASS, ERROR_MESSAGE, HEADERS_DROPPED, SOURCE_OFFSET, SOURCE_PARTITION,
                                  SOURCE_TOPIC, VALUE_DROPPED, Header, carried, dead_letter_headers,
                                  dead_letter_headers_with_input, ribbon_values)
from worker.messages.models import BadMessage
from worker.pipeline.inflight import Doc
from worker.pipeline.spill import Spool
from worker.pipeline.tracker import OffsetTracker, Record, TopicPartition
from worker.redaction import dead_letter_value, scrub

log = logging.getLogger(__name__)

HEADER_BUDGET = 16_384  # bytes of input headers (names and values) a refused record's dead letter keeps at most
REFUSED_CLASS = "output_refused"  # a summary the broker refused (a refused dead letter keeps its own class)


class DeadLetters:
    """Builds dead-letter records and completes their offsets with them."""

    def __init__(self, *, dlq_topic: str, tracker: OffsetTracker, count: Callable[[str], None],
                 wake: Callable[[], None], spool: Spool | None = None,
                 count_skipped: Callable[[str], None] = lambda _reason: None) -> None:
        self.dlq_topic, self.tracker = dlq_topic, tracker
        self.spool = spool or Spool(threshold=0)  # 0: values stay in memory
        self._count, self._wake = count, wake  # metrics counter by error class; delivery's wake-up
        self._count_skipped = count_skipped  # ribbon_skipped_records_total by reason

    def send(self, tp: TopicPartition, epoch: int, offset: int, key: bytes | None, value: bytes | None,
             error_class: str, message: str, in_headers: Iterable[Header] | None = ()) -> bool:
        """Complete `offset` with a dead letter; False if its partition epoch is gone (revoked)."""
        err = BadMessage(error_class, scrub(message))  # a reason may quote the input (worker/redaction/)
        ribbon = dead_letter_headers(err, topic=tp[0], partition=tp[1], offset=offset, worker_version=__version__)
        rec = Record(self.dlq_topic, key, self.spool.hold(dead_letter_value(value)),
                     dead_letter_headers_with_input(in_headers, ribbon))
        if not self.tracker.complete(tp, epoch, offset, (rec,)):
            return False
        self._count(error_class)
        self._wake()
        return True

    def doc(self, doc: Doc, error_class: str, message: str) -> bool:
        """Dead-letter a document already taken in (its original bytes and headers ride on it)."""
        return self.send(doc.tp, doc.epoch, doc.offset, doc.key, doc.raw, error_class, message, doc.headers)

    def failure(self, doc: Doc, exc: BaseException, error_class: str = "model_error") -> bool:
        """Dead-letter a document whose processing raised `exc` (the class and message are kept)."""
        return self.doc(doc, error_class, f"{type(exc).__name__}: {exc}")

    def refused(self, rec: Record, reason: str) -> Record:
        """The dead letter that replaces `rec` (a summary or a dead letter) after the broker refused it
        (`reason`, e.g. msg_size_too_large): no value, no key, the input's headers only when they are at
        most HEADER_BUDGET bytes, and the coordinates and the reason. Counted by its error class."""
        mine = ribbon_values(rec.headers)
        topic = mine.get(SOURCE_TOPIC) or "unknown"
        partition, offset = _int(mine.get(SOURCE_PARTITION)), _int(mine.get(SOURCE_OFFSET))
        what = f"value {rec.size} B, key {len(rec.key or b'')} B, headers {_header_bytes(rec.headers)} B"
        if ERROR_CLASS in mine:
            error_class = mine[ERROR_CLASS]
            message = f"{mine.get(ERROR_MESSAGE, '')} [its dead letter ({what}) refused: {reason}]"
        else:
            error_class, message = REFUSED_CLASS, f"the output to {rec.topic} ({what}) was refused: {reason}"
        theirs = carried(rec.headers)
        extra: tuple[Header, ...] = ((VALUE_DROPPED, reason.encode()),)
        if _header_bytes(theirs) > HEADER_BUDGET:
            extra += ((HEADERS_DROPPED, f"{len(theirs)} headers, {_header_bytes(theirs)} B".encode()),)
            theirs = ()
        ribbon = dead_letter_headers(BadMessage(error_class, message), topic=topic, partition=partition,
                                     offset=offset, worker_version=__version__)
        log.warning("a record for %s was refused (%s; %s): its dead letter goes without value and key",
                    rec.topic, reason, what, extra={"topic": topic, "partition": partition, "offset": offset,
                                                    "error_class": error_class})
        self._count(error_class)
        return Record(self.dlq_topic, None, None, (*theirs, *ribbon, *extra))

    def skipped(self, rec: Record, reason: str) -> None:
        """Even the smallest dead letter for `rec` was refused: its offset commits with nothing produced."""
        mine = ribbon_values(rec.headers)
        topic, partition, offset = (mine.get(k) for k in (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET))
        log.error("input %s/%s@%s skipped: even its dead letter without value, key and headers was refused by "
                  "%s (%s); its offset commits with no output", topic, partition, offset, self.dlq_topic, reason,
                  extra={"topic": topic, "partition": partition, "offset": offset, "reason": reason})
        self._count_skipped(reason)


def _int(text: str | None) -> int:
    return int(text) if text is not None and text.isdigit() else 0


def _header_bytes(headers: Iterable[Header]) -> int:
    return sum(len(k.encode()) + len(v or b"") for k, v in headers)
