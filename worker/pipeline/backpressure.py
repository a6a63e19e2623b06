"""Ingest's backpressure: pause every assigned partition above a high watermark, resume below a low one.

Contract:
- Owns: the paused flag and the gauges it reads each time (pending tokens, documents in flight,
  the reorder set, spilled bytes). Ingest calls `update` once per loop turn on its own thread (the
  consumer is never called from another); polling goes on while paused, so the group never sees
  the consumer as stuck.
- Pauses while draining, above `high_tokens` pending in the packer, above `high_messages` documents in
  flight (a closed window counts as one, whether on its way or waiting for its partition's commit
  point; records held in open windows are capped by windowing.* instead, so they do not count), or
  while windowing is full; resumes only when none of that holds and both counts are below the low marks.
- Never blocks beyond the consumer's own pause/resume calls; raises nothing of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("worker.pipeline.ingest")


@dataclass(frozen=True)
class Watermarks:
    high_tokens: int
    low_tokens: int
    high_messages: int
    low_messages: int


class Backpressure:
    def __init__(self, marks: Watermarks, shared) -> None:
        self.marks, self.tracker, self.metrics, self.dead_letters = marks, shared.tracker, shared.metrics, \
            shared.dead_letters
        self.paused = False

    def update(self, consumer, *, packer, lines, draining: bool) -> None:
        """Measure, then pause or resume `consumer`'s whole assignment when the watermarks say so."""
        tokens = packer.stats().pending_tokens if packer is not None else 0
        inflight = self.tracker.pending()
        # Documents, not records: a closed window counts once (its records wait for their partition's
        # commit point as cheap offsets), and open windows' records are capped by windowing.* instead.
        docs = self.tracker.pending_documents() - lines.held_records() if lines is not None else inflight
        full = lines is not None and lines.full()
        m = self.metrics
        m.pending_tokens.set(tokens)
        m.inflight.set(inflight)
        m.reorder.set(self.tracker.waiting())
        m.spilled.set(self.dead_letters.spool.held_bytes)
        want_pause = draining or tokens > self.marks.high_tokens or \
            docs > self.marks.high_messages or full
        want_resume = not draining and tokens < self.marks.low_tokens and \
            docs < self.marks.low_messages and not full
        parts = consumer.assignment()
        if want_pause and not self.paused:
            consumer.pause(parts)
            self.paused = True
            m.paused.set(len(parts))
            log.info("paused %d partitions (pending tokens %d, in flight %d)", len(parts), tokens, inflight)
        elif want_resume and self.paused:
            consumer.resume(parts)
            self.paused = False
            m.paused.set(0)
            log.info("resumed %d partitions", len(parts))
