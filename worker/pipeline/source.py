"""The poll and the decoding, on the ingest thread: the consumer's records in, documents out.

    poll (`take`) → per record: consume error → logged; one tied to an offset (a batch that cannot be
    decompressed or is corrupt) → after CONSUME_ERROR_TRIES the offset is a dead letter and the consumer
    seeks past it | not ours any more → skipped
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
from itertools import islice, repeat
from operator import is_not, ne

from confluent_kafka import KafkaError, TopicPartition

from worker.kafka.clients import take
from worker.messages.models import BadMessage, decode_input, default_id
from worker.observability.metrics import observe_ages
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import Doc
from worker.pipeline.lines import LineStream
from worker.pipeline.stage import Shared

log = logging.getLogger(__name__)

# Consumer errors that one offset causes, whatever the broker's state: librdkafka fetches that offset again
# and fails again, for ever. After this many tries in a row the offset is skipped as a dead letter.
OFFSET_ERRORS = {KafkaError._BAD_COMPRESSION: "bad_compression", KafkaError._BAD_MSG: "corrupt_record",
                 KafkaError.INVALID_MSG: "corrupt_record", KafkaError.INVALID_RECORD: "corrupt_record"}
CONSUME_ERROR_TRIES = 5
LINE_POLLS = 16  # a full poll of line records is topped up to this many polls' worth of what is fetched


def _errors(msgs: list) -> bool:
    """Is any of the records a consume error? (By identity: a KafkaError does not compare with None.)"""
    return any(map(is_not, [m.error() for m in msgs], repeat(None)))


def _line_runs(msgs: list, line_topics: frozenset) -> dict | None:
    """A poll of line records only, none of them a consume error (the common case of a windowed worker), as
    {(topic, partition): its records, in order}, split where the partition changes; else None (the records
    are sorted one by one)."""
    if not msgs or _errors(msgs):
        return None
    topics = [m.topic() for m in msgs]
    if not line_topics.issuperset(topics):
        return None
    parts = [m.partition() for m in msgs]
    cuts = [i for i, changed in enumerate(map(ne, parts, islice(parts, 1, None)), 1) if changed]
    if len(set(topics)) > 1:
        cuts = sorted({*cuts, *(i for i, changed in enumerate(map(ne, topics, islice(topics, 1, None)), 1) if changed)})
    runs: dict = {}
    for a, b in zip([0, *cuts], [*cuts, len(msgs)]):
        runs.setdefault((topics[a], parts[a]), []).extend(msgs[a:b])
    return runs


class Source:
    def __init__(self, config, shared: Shared, lines: LineStream | None, guard: Guard) -> None:
        """`config`: ingest's (worker/pipeline/ingest.py: max_message_bytes, poll_batch)."""
        self.max_bytes, self.batch = config.max_message_bytes, config.poll_batch
        self.tracker, self.metrics, self.dead_letters = shared.tracker, shared.metrics, shared.dead_letters
        self.lines, self.guard = lines, guard
        self._tries: dict[tuple, tuple[int, int]] = {}  # (topic, partition) -> (offset, consume errors there in a row)
        self._seeks: list[TopicPartition] = []  # past offsets dead-lettered for a consume error

    def poll(self, consumer, timeout_s: float) -> list:
        """Up to pipeline.poll_batch records (tokenized together later): what is fetched, at once. First the
        consumer seeks past offsets that a consume error dead-lettered (`_offset_error`)."""
        seeks, self._seeks = self._seeks, []
        for tp in seeks:
            try:
                consumer.seek(tp)
            except Exception as exc:  # noqa: BLE001 - the partition went meanwhile (revoked): nothing to skip
                log.warning("seek past %s/%d@%d failed: %s", tp.topic, tp.partition, tp.offset - 1, exc)
        return take(consumer, self.batch, timeout_s)

    def more_lines(self, consumer, msgs: list) -> list:
        """A full poll of line records, topped up with what is already fetched (no wait), up to LINE_POLLS
        polls' worth: a line is a small share of a window, and the windows one ingest call closes go to the
        digest pool and the tokenizer as one batch instead of one window at a time."""
        chunk, topics = msgs, self.lines.topics
        while len(chunk) >= self.batch and len(msgs) < LINE_POLLS * self.batch and \
                not _errors(chunk) and topics.issuperset([m.topic() for m in chunk]):
            chunk = consumer.consume(num_messages=self.batch, timeout=0)
            msgs = msgs + chunk
        return msgs

    def documents(self, msgs: list) -> list[Doc]:
        """The polled records as documents; the bad ones completed with a dead letter, the others
        (consume errors, partitions no longer ours) skipped. A line topic's records go to the window
        stream all of one partition's at once, after the call's documents (`_lines`), each partition's
        registered under one lock: the windows of different partitions are apart, and one partition's
        records keep their order."""
        good: list[Doc] = []
        wall = time.time()
        epochs: dict = {}  # per partition, for this call: rebalances run inside poll, never in here
        consumed = 0
        age = self.metrics.record_age
        lines = self.lines
        line_topics = lines.topics if lines is not None else frozenset()
        runs = _line_runs(msgs, line_topics) if line_topics else None  # a line partition's records, in order
        one_by_one = msgs if runs is None else ()
        runs = {} if runs is None else runs
        for m in one_by_one:
            if m.error() is not None:
                if m.error().code() in OFFSET_ERRORS and m.topic() is not None and (m.offset() or -1) >= 0:
                    self._offset_error(m)
                elif not m.error().name() == "_PARTITION_EOF":
                    log.warning("consume error: %s", m.error())
                continue
            tp = (m.topic(), m.partition())
            if tp[0] in line_topics:  # the window stream's
                run = runs.get(tp)
                if run is None:
                    runs[tp] = [m]
                else:
                    run.append(m)
                continue
            epoch = epochs[tp] if tp in epochs else epochs.setdefault(tp, self.tracker.epoch(tp))
            if epoch is None or not self.tracker.see(tp, epoch, m.offset()):
                continue  # not ours any more
            consumed += 1
            if self._tries:  # the partition reads again: its earlier consume errors were passing ones
                self._tries.pop(tp, None)
            kind, ts_ms = m.timestamp()
            if kind != 0:  # TIMESTAMP_NOT_AVAILABLE
                age.observe(max(0.0, wall - ts_ms / 1e3))
            good.extend(self._one(m, tp, epoch))
        for tp, run in runs.items():
            consumed += self._lines(run, tp, epochs, wall, good)
        self.metrics.consumed.inc(consumed)
        return good

    def _lines(self, run: list, tp, epochs: dict, wall: float, good: list[Doc]) -> int:
        """One partition's run of line records: registered (`tracker.see_many`), their ages observed, and given
        to the window stream together; the documents of the windows they closed onto `good`. Returns how
        many were registered."""
        epoch = epochs[tp] if tp in epochs else epochs.setdefault(tp, self.tracker.epoch(tp))
        if epoch is None:
            return 0  # not ours any more
        offsets = [m.offset() for m in run]
        seen = self.tracker.see_many(tp, epoch, offsets)
        if not all(seen):
            run, offsets = [m for m, ok in zip(run, seen) if ok], [o for o, ok in zip(offsets, seen) if ok]
        if not run:
            return 0
        if self._tries:  # the partition reads again: its earlier consume errors were passing ones
            self._tries.pop(tp, None)
        stamps = [m.timestamp() for m in run]  # read once: the ages here, the windows' times there
        observe_ages(self.metrics.record_age, wall, stamps)

        def failed(m, exc: Exception) -> None:
            self.guard.failed("lines", tp, epoch, m.offset(), m.key(), m.value(), m.headers(), exc)

        good.extend(self.lines.add_many(run, tp, epoch, failed, read=(offsets, stamps)))
        return len(run)

    def _offset_error(self, m) -> None:
        """A consume error at one offset: logged; at the CONSUME_ERROR_TRIES-th in a row, that offset is
        completed with a dead letter (no value, no key: there are none to read) and skipped."""
        tp, offset, err = (m.topic(), m.partition()), m.offset(), m.error()
        at, tries = self._tries.get(tp, (offset, 0))
        tries = tries + 1 if at == offset else 1
        self._tries[tp] = (offset, tries)
        self.metrics.consume_errors.labels(err.name()).inc()
        log.warning("consume error at %s/%d@%d (try %d of %d): %s", tp[0], tp[1], offset, tries,
                    CONSUME_ERROR_TRIES, err, extra={"topic": tp[0], "partition": tp[1], "offset": offset})
        if tries < CONSUME_ERROR_TRIES:
            return
        del self._tries[tp]
        epoch = self.tracker.epoch(tp)
        if epoch is None or not self.tracker.see(tp, epoch, offset):
            return  # not ours any more
        self.dead_letters.send(tp, epoch, offset, None, None, OFFSET_ERRORS[err.code()],
                               f"the consumer could not read this offset {tries} times: {err.str()}")
        self._seeks.append(TopicPartition(tp[0], tp[1], offset + 1))
        log.error("input %s/%d@%d skipped as a dead letter after %d consume errors (%s)", tp[0], tp[1], offset,
                  tries, err.name(), extra={"topic": tp[0], "partition": tp[1], "offset": offset})

    def _one(self, m, tp, epoch: int) -> list[Doc]:
        """One registered document record's Doc, or none (a line topic's records go through `_lines`)."""
        try:
            doc = self._decode(m, tp, epoch)
        except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard (worker/pipeline/guard.py)
            self.guard.failed("decode", tp, epoch, m.offset(), m.key(), m.value(), m.headers(), exc)
            return []
        return [] if doc is None else [doc]

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
