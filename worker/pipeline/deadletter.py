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

Thread-safe (the tracker and the spool are); never blocks beyond their locks
(and one file write for a spilled value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from worker import __version__
from worker.messages.models import BadMessage, dead_letter_headers
from worker.kafka.headers import Header, dead_letter_headers_with_input
from worker.pipeline.inflight import Doc
from worker.pipeline.spill import Spool
from worker.pipeline.tracker import OffsetTracker, Record, TopicPartition
from worker.redaction import dead_letter_value, scrub


class DeadLetters:
    """Builds dead-letter records and completes their offsets with them."""

    def __init__(self, *, dlq_topic: str, tracker: OffsetTracker, count: Callable[[str], None],
                 wake: Callable[[], None], spool: Spool | None = None) -> None:
        self.dlq_topic, self.tracker = dlq_topic, tracker
        self.spool = spool or Spool(threshold=0)  # 0: values stay in memory
        self._count, self._wake = count, wake  # metrics counter by error class; delivery's wake-up

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
