"""The poll and the decoding, on the ingest thread: the consumer's records in, documents out.

    poll (`take`) → per record: consume error → logged | not ours any more → skipped
    → tracker.see(offset) → line topic: the window stream (worker/pipeline/lines.py)
    | else decode and validate (worker/messages/models.py) → Doc, or a dead letter

Contract:
- Owns: the decoding of a record into a Doc; every offset it registers (`tracker.see`) ends as a
  Doc (or a window's part) or, at once, as a dead letter. The consumer stays ingest's: `poll` is
  handed it (rebalance callbacks run inside that call, on ingest's thread).
- May block: in `poll`, at most `timeout_s` and only with nothing fetched; nowhere else.
- Errors: bad input (`BadMessage`) becomes a dead letter with its class and reason; anything else
  one record raises becomes an `internal_error` dead letter (worker/pipeline/guard.py). Nothing
  one record does ends the stage.
"""

from __future__ import annotations

import logging
import time

from worker.kafka.clients import take
from worker.messages.models import BadMessage, decode_input, default_id
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import Doc
from worker.pipeline.lines import LineStream
from worker.pipeline.stage import Shared

log = logging.getLogger(__name__)


class Source:
    def __init__(self, settings, shared: Shared, lines: LineStream | None, guard: Guard) -> None:
        """`settings`: worker.config.settings.Settings (kafka.max_message_bytes, pipeline.poll_batch)."""
        self.max_bytes, self.batch = settings.kafka.max_message_bytes, settings.pipeline.poll_batch
        self.tracker, self.metrics, self.dead_letters = shared.tracker, shared.metrics, shared.dead_letters
        self.lines, self.guard = lines, guard

    def poll(self, consumer, timeout_s: float) -> list:
        """Up to pipeline.poll_batch records (tokenized together later): what is fetched, at once."""
        return take(consumer, self.batch, timeout_s)

    def documents(self, msgs: list) -> list[Doc]:
        """The polled records as documents; the bad ones completed with a dead letter, the others
        (consume errors, partitions no longer ours) skipped."""
        good: list[Doc] = []
        wall = time.time()
        epochs: dict = {}  # per partition, for this call: rebalances run inside poll, never in here
        consumed = 0
        age = self.metrics.record_age
        for m in msgs:
            if m.error() is not None:
                if not m.error().name() == "_PARTITION_EOF":
                    log.warning("consume error: %s", m.error())
                continue
            tp = (m.topic(), m.partition())
            epoch = epochs[tp] if tp in epochs else epochs.setdefault(tp, self.tracker.epoch(tp))
            if epoch is None or not self.tracker.see(tp, epoch, m.offset()):
                continue  # not ours any more
            consumed += 1
            kind, ts_ms = m.timestamp()
            if kind != 0:  # TIMESTAMP_NOT_AVAILABLE
                age.observe(max(0.0, wall - ts_ms / 1e3))
            good.extend(self._one(m, tp, epoch))
        self.metrics.consumed.inc(consumed)
        return good

    def _one(self, m, tp, epoch: int) -> list[Doc]:
        """One registered record's documents: a window stream's closed windows, its Doc, or none."""
        stage = "lines" if self.lines is not None and self.lines.takes(tp[0]) else "decode"
        try:
            if stage == "lines":
                return self.lines.add(m, tp, epoch)
            doc = self._decode(m, tp, epoch)
            return [] if doc is None else [doc]
        except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard (worker/pipeline/guard.py)
            self.guard.failed(stage, tp, epoch, m.offset(), m.key(), m.value(), m.headers(), exc)
            return []

    def _decode(self, m, tp, epoch: int) -> Doc | None:
        """One polled record as a Doc, or None when it was dead-lettered as bad input."""
        try:
            msg = decode_input(m.value(), max_bytes=self.max_bytes)
        except BadMessage as err:
            self.dead_letters.send(tp, epoch, m.offset(), m.key(), m.value(), err.error_class, err.message,
                                   tuple(m.headers() or ()))
            return None
        doc_id = msg.id or default_id(tp[0], tp[1], m.offset())
        meta = {"id": doc_id, "source": msg.source, "kind": msg.kind, "attributes": msg.attributes}
        return Doc(tp, epoch, m.offset(), m.key(), doc_id, msg.document, meta, time.monotonic(),
                   raw=m.value(), headers=tuple(m.headers() or ()))
