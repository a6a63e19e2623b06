"""The ingest stage's last-resort guard: no exception from one message ends the stage.

Bad input is already routed by the decoder and the digest pass (BadMessage, `Prepared.error`).
What still raises on one message is a bug or a resource limit met by that message alone (a
RecursionError, a MemoryError): the guard dead-letters the message with class `internal_error`
and the exception's type and text, logs it with its traceback, counts it in
`ribbon_internal_errors_total{stage,exception}`, and ingest goes on with the next message. A
failure of a batch step (planning a poll batch together) is retried one document at a time, so
only the document that raises is dead-lettered.

Infrastructure failures are not routed here: a broken preprocessing pool, a closed packer and
consumer errors still stop the worker (nothing uncommitted is lost; a restart redoes it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import Doc

log = logging.getLogger(__name__)

R = TypeVar("R")
ERROR_CLASS = "internal_error"


class Guard:
    def __init__(self, dead_letters: DeadLetters, metrics) -> None:
        self.dead_letters, self.metrics = dead_letters, metrics

    def failed(self, stage: str, tp, epoch: int, offset: int, key: bytes | None, value: bytes | None,
               headers, exc: BaseException) -> None:
        """Dead-letter one input whose processing raised `exc` in `stage`, and say so."""
        name = type(exc).__name__
        log.error("%s raised %s on input %s/%d@%d: dead-lettered as %s", stage, name, tp[0], tp[1], offset,
                  ERROR_CLASS, exc_info=exc,
                  extra={"topic": tp[0], "partition": tp[1], "offset": offset, "stage": stage, "exception": name})
        self.metrics.internal_errors.labels(stage, name).inc()
        self.dead_letters.send(tp, epoch, offset, key, value, ERROR_CLASS, f"{name} in {stage}: {exc}",
                               tuple(headers or ()))

    def doc(self, stage: str, doc: Doc, exc: BaseException) -> None:
        self.failed(stage, doc.tp, doc.epoch, doc.offset, doc.key, doc.raw, doc.headers, exc)

    def each(self, docs: Sequence[Doc], step: Callable[[list[Doc]], Sequence[R]], stage: str) -> Iterable[tuple[Doc, R]]:
        """(doc, result) of a batch step over `docs`; if the batch raises, each document alone, and a
        document that raises alone is dead-lettered (the others go on)."""
        try:
            return list(zip(docs, step(list(docs)), strict=True))
        except Exception as exc:  # noqa: BLE001 - routed: retried alone, then dead-lettered
            if len(docs) == 1:
                self.doc(stage, docs[0], exc)
                return []
        out: list[tuple[Doc, R]] = []
        for d in docs:
            out.extend(self.each([d], step, stage))
        return out
