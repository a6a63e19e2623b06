"""The finishing stage: everything per document after the model, on its own thread.

Contract (the seam between the GPU loop, or any other producer of finished
documents, and delivery):

- Owns: turning a finished sequence into what delivery sends. Per document:
  the registry's round bookkeeping (`DocRegistry.finish`), the hand-back of a
  chunked document's round to ingest for its combine step, the output message
  (`worker.pipeline.outputs.build_output`: highlights, digest rendering), its
  encoding, key and headers, the offset's completion in the tracker, latency
  and token metrics, and dead letters for documents that failed.
- Entry points:
  `submit_bin(results)`: the GPU loop hands over one bin's `(seq, result)`
  pairs, where a result is a generation output (`.text`, `.token_ids`), an
  exception (the document failed alone: it is dead-lettered) or None (its
  partition was revoked while it ran: dropped).
  `submit_finished(doc, summary_text)`: any producer of a finished document
  with no model round to account for (e.g. a model-free digest mode that goes
  from ingest straight here). Both are thread-safe.
- May block: both submits block while the queue holds `capacity` items; that
  is the GPU's backpressure, explicit and bounded. They return False (and keep
  nothing) once the stage is stopping. The thread itself blocks only on its
  queue.
- Errors: a document whose output cannot be built is dead-lettered (one
  dead-letter function for every stage, worker/pipeline/deadletter.py) and the
  stage goes on. Anything else stops the thread with `error` set; the app
  then stops the worker without committing more.
- Shutdown: `stop()` then join the thread: it finishes what is queued (so a
  drain loses nothing that reached it), then returns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from worker.messages.models import encode_output, output_key
from worker.kafka.headers import output_headers
from worker.pipeline.inflight import Doc, Seq
from worker.pipeline.outputs import build_output
from worker.redaction import scrub_headers
from worker.pipeline.tracker import Record
from worker.pipeline.stage import HEALTHY, Health, Shared, StageThread, run_stage

log = logging.getLogger(__name__)


class Generated(Protocol):
    """What the engine returns per sequence."""

    text: str
    token_ids: Sequence[int]


Result = Any  # Generated | BaseException | None (see the module contract)


@dataclass(frozen=True)
class FinishedBin:
    """One bin's results, as the GPU loop hands them over."""

    pairs: tuple[tuple[Seq | None, Result], ...]
    gpu_s_per_doc: float  # the bin's model time shared over its documents


@dataclass(frozen=True)
class FinishedDoc:
    """A document finished without a model round (e.g. digest mode)."""

    doc: Doc
    summary: str


@dataclass(frozen=True)
class FinishingConfig:
    output_topic: str  # kafka.output_topic
    model_name: str  # the outputs' `model`
    mode: str  # model.mode: "generative" or "digest"
    highlights: int  # digest.highlights
    grounding: str  # generation.grounding
    capacity: int = 8  # bins (or finished documents) queued at most: the GPU's backpressure


class Finishing(StageThread):
    thread_name = "ribbon-finishing"

    """The finishing thread (see the module contract)."""

    def __init__(self, *, config: FinishingConfig, shared: Shared, combine: Callable[[Doc], None],
                 wake: Callable[[], None], clock: Callable[[], float] = time.monotonic, tracer=None) -> None:
        if config.capacity < 1:
            raise ValueError(f"finishing capacity must be >= 1, got {config.capacity}")
        self.config, self.output_topic = config, config.output_topic
        self.registry, self.tracker, self.dead_letters = shared.registry, shared.tracker, shared.dead_letters
        self.combine, self.metrics, self.wake, self.clock = combine, shared.metrics, wake, clock
        self.tracer = tracer  # worker/observability/tracing.DocTracer, or None: no traces
        self._q: queue.Queue[FinishedBin | FinishedDoc] = queue.Queue(maxsize=config.capacity)
        self._stop = threading.Event()
        self.error: BaseException | None = None

    # ---- entry points (any thread) -----------------------------------------------------
    def submit_bin(self, pairs: Sequence[tuple[Seq | None, Result]], gpu_s_per_doc: float) -> bool:
        """Hand over one bin's results; blocks while the queue is full. False once stopping."""
        return self._put(FinishedBin(tuple(pairs), gpu_s_per_doc))

    def submit_finished(self, doc: Doc, summary_text: str) -> bool:
        """Hand over a finished document (no model round to account for); blocks while full."""
        return self._put(FinishedDoc(doc, summary_text))

    def _put(self, item: FinishedBin | FinishedDoc) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def queued(self) -> int:
        return self._q.qsize()

    def stop(self) -> None:
        """The thread finishes what is queued, then returns; submits from now on return False."""
        self._stop.set()

    def health(self) -> Health:
        """Finishing waits only on its queue: its own progress needs no watch."""
        return HEALTHY

    # ---- the thread ----------------------------------------------------------------------
    def run(self) -> None:
        run_stage(self, self._loop, log, "finishing thread")

    def _loop(self) -> None:
        while True:
            try:
                item = self._q.get(timeout=0.05)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if isinstance(item, FinishedBin):
                self._finish_bin(item)
            elif self._output(item.doc, item.summary):
                self.wake()

    def _finish_bin(self, item: FinishedBin) -> None:
        """Every document of the bin, then one wake: delivery takes the whole bin in one transaction
        (woken at its first output, it would commit that one alone and the rest a transaction later)."""
        completed = 0
        for seq, result in item.pairs:
            if seq is None or result is None:
                continue  # its partition was revoked while it ran
            if isinstance(result, BaseException):
                self.dead_letters.failure(seq.doc, result)
                continue
            self.metrics.output_tokens.inc(len(result.token_ids))
            if self.registry.finish(seq, result.text, len(result.token_ids), item.gpu_s_per_doc):
                if seq.final:
                    completed += self._output(seq.doc, seq.doc.parts[0])
                else:
                    self.combine(seq.doc)  # ingest plans the combine step (it owns the tokenizer)
        if completed:
            self.wake()

    def _output(self, doc: Doc, summary: str) -> bool:
        """Build, encode and complete one document's output (True: delivery has something new); a
        failure dead-letters it."""
        now = self.clock()
        try:
            msg = build_output(doc, summary, config=self.config, now=now)
            value = encode_output(msg)
        except Exception as exc:  # noqa: BLE001 - routed: this document goes to the dead-letter topic
            log.warning("output of %s could not be built: %s", doc.doc_id, exc)
            self.dead_letters.failure(doc, exc, "output_error")
            return False
        headers = output_headers(scrub_headers(doc.headers), doc.tp[0], doc.tp[1], doc.offset)
        if self.tracer is not None:  # the output's traceparent becomes the worker's document span
            headers = self.tracer.headers(doc, headers, now)
        rec = Record(self.output_topic, output_key(doc.key, msg), value, headers)
        if not self.tracker.complete(doc.tp, doc.epoch, doc.offset, (rec,)):
            return False
        self.metrics.latency.observe(now - doc.received)
        for kind, n in msg.redactions.items():  # counts only: the values never leave the redaction pass
            self.metrics.redactions.labels(kind).inc(n)
        self.metrics.published.labels(msg.summary.source, msg.summary.reason).inc()
        if msg.grounding is not None:
            count_grounding(self.metrics, msg.grounding)
        return True


def count_grounding(metrics, g) -> None:
    """ribbon_ungrounded_* from one output's grounding report."""
    if g.unsupported:
        metrics.ungrounded_summaries.inc()
        metrics.ungrounded_identifiers.inc(len(g.unsupported))
    metrics.ungrounded_sentences.inc(g.dropped_sentences)
    metrics.ungrounded_fallbacks.inc(int(g.fallback))
