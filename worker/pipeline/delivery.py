"""The delivery thread: it alone owns the producer.

exactly_once: each step takes, per partition, the complete prefix of seen
offsets (tracker.take_ready) and produces those outputs and commits their
offsets in ONE transaction. An abortable error aborts, puts the runs back and
retries; a fatal one stops the worker without committing.

Every transactional call is bounded (kafka.delivery_stuck_s / 12, then retried or
aborted), and so is the whole step (kafka.delivery_stuck_s): a step under way
for half of it turns /healthz red (`stuck_for`), and a transaction that can be
neither committed nor aborted by then stops the worker (exit 1) so that a
supervisor restarts it; the new producer's init_transactions fences and aborts
the stuck transaction. Nothing is committed that was not produced.
at_least_once: idempotent producer; produce, wait for every delivery report,
then post the offsets to the ingest thread, which commits them. A crash
between the two repeats outputs, which carry deterministic ids.

This thread never calls the consumer: the group metadata, revokes and
at_least_once offsets go through one channel with ingest
(worker/pipeline/commits.py, `self.commits`), whose contract is written there.
A revoke runs one more step here with the metadata taken inside the revoke
callback, then the partitions are forgotten, and only then does ingest go on.

Contract:
- Owns: the producer (built on this thread by the injected `make_producer`),
  the producer's side of the commit channel, and the tracker's `take_ready` /
  `put_back` / `mark_committed`.
- Input: offsets completed in the tracker (by finishing and `DeadLetters`),
  each followed by `wake()`; without a wake it still steps every
  `DeliveryConfig.interval_s` (0.5 s).
- May block: in transactional calls and `flush`; never on another stage.
- Errors: abortable → abort, put back, retry; fatal → `error` set, the app stops
  the worker without committing more.
- Shutdown: `stop()` (it wakes the thread): one last step, then the channel
  closes and the producer flushes. Health: not live while one step has taken
  half of kafka.delivery_stuck_s.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from worker.errors import RibbonError
from worker.kafka.clients import Factory
from worker.pipeline.commits import Commits
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.spill import Spilled
from worker.pipeline.stage import HEALTHY, Health, StageThread, run_stage
from worker.pipeline.tracker import OffsetTracker, Ready

log = logging.getLogger(__name__)


# Errors that refuse one record (its size with key and headers, or its form), never the broker's state:
# the record is replaced by a dead letter sure to fit (DeadLetters.refused), then skipped.
REFUSALS = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD})


class FatalDeliveryError(RibbonError, RuntimeError):
    """The producer cannot go on (fenced, fatal error, a transaction stuck): stop without committing."""


class _Deadline:
    """The time left to one delivery step; `check` raises FatalDeliveryError once it is spent."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, what: str) -> None:
        if self.left() <= 0:
            log.error("delivery stuck: %s did not finish within %.0f s (kafka.delivery_stuck_s); stopping the "
                      "worker so that a restart fences the open transaction", what, self.seconds)
            raise FatalDeliveryError(f"{what} did not finish within {self.seconds:.0f} s")


@dataclass(frozen=True)
class DeliveryConfig:
    output_topic: str  # kafka.output_topic
    dlq_topic: str  # kafka.dlq_topic
    exactly_once: bool  # kafka.delivery == "exactly_once"
    txn_call_timeout_s: float  # one transactional call or flush, at most (kafka.delivery_stuck_s / 12)
    delivery_stuck_s: float  # one whole step, at most (kafka.delivery_stuck_s)
    interval_s: float = 0.5  # the unwoken step's period (a safety net: every completion wakes delivery)
    max_records: int = 2000  # records per transaction at most
    max_bytes: int = 64 << 20


class Delivery(StageThread):
    thread_name = "ribbon-delivery"

    def __init__(self, *, config: DeliveryConfig, make_producer: Factory, tracker: OffsetTracker, metrics,
                 tracer=None, dead_letters: DeadLetters | None = None):
        interval_s, max_records, max_bytes = config.interval_s, config.max_records, config.max_bytes
        self.output_topic = config.output_topic
        self.tracer = tracer  # worker/observability/tracing.DocTracer, or None: no traces
        self.exactly_once = config.exactly_once
        self.make_producer = make_producer  # called on this thread (worker/kafka/clients.py, or a fake)
        self.tracker, self.metrics = tracker, metrics
        self.interval_s, self.max_records, self.max_bytes = interval_s, max_records, max_bytes
        self.op_timeout_s = config.txn_call_timeout_s  # one transactional call or flush, at most
        self.stuck_s = config.delivery_stuck_s  # one whole step, at most
        self._wake = threading.Event()
        self.stopping = threading.Event()  # stop()
        self.commits = Commits(tracker, wake=self.wake)  # the one channel with ingest (worker/pipeline/commits.py)
        self.busy = False  # a step is under way (drain waits for it)
        self.busy_since: float | None = None  # time.monotonic() at the start of the step under way
        # Records the broker refused, by id(): (the record, what goes in its place: a dead letter sure to fit,
        # or None once even that was refused: skipped). The record is held so that its id stays its own.
        self._replaced: dict[int, tuple[object, object]] = {}
        self.dead_letters = dead_letters or DeadLetters(
            dlq_topic=config.dlq_topic, tracker=tracker, wake=self.wake,
            count=lambda cls: metrics.dead_lettered.labels(cls).inc(),
            count_skipped=lambda reason: metrics.skipped.labels(reason).inc())
        self.producer = None
        self.error: BaseException | None = None
        self.started = threading.Event()

    def wake(self) -> None:
        self._wake.set()

    def stuck_for(self) -> float:
        """Seconds the step under way has taken (0 when idle); /healthz is red past half of delivery_stuck_s."""
        since = self.busy_since
        return 0.0 if since is None else time.monotonic() - since

    def failure(self) -> BaseException | None:
        """Why delivery cannot go on, or None. Read by the app's watchdog on its own thread: a librdkafka
        call that ignores its timeout (send_offsets_to_transaction waits out a frozen broker whatever
        it is given) cannot stop this thread, so a step past kafka.delivery_stuck_s fails from outside."""
        if self.error is None and self.stuck_for() > self.stuck_s:
            log.error("delivery stuck: one step has taken %.0f s, more than kafka.delivery_stuck_s (%.0f s); "
                      "stopping the worker so that a restart fences the open transaction",
                      self.stuck_for(), self.stuck_s)
            self.error = FatalDeliveryError(f"a delivery step did not finish within {self.stuck_s:.0f} s")
            self.commits.close()  # a revoke waiting for this thread forgets its partitions uncommitted
        return self.error

    # ---- the thread ---------------------------------------------------------------
    def run(self) -> None:
        run_stage(self, self._loop, log, "delivery thread", cleanup=self._close)

    def stop(self) -> None:
        self.stopping.set()
        self.wake()

    def health(self) -> Health:
        """Not live once one step has taken half of kafka.delivery_stuck_s (at all of it `failure` stops it)."""
        stuck = self.stuck_for()
        if stuck >= self.stuck_s / 2:
            return Health(live=False, why=f"delivery stuck for {stuck:.0f} s (a transaction neither commits nor aborts)")
        return HEALTHY

    def _loop(self) -> None:
        self.producer = self.make_producer()
        if self.exactly_once:
            self._init_transactions()
        self.started.set()
        while not self.stopping.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            self.commits.serve(self.step)  # revokes first, each with its own metadata
            self.step()
        self.commits.serve(self.step)
        self.step()  # the last finished results go out before we leave

    def _close(self) -> None:
        self.started.set()
        self.commits.close()
        if self.producer is not None:
            self._flush_at_exit()

    def _flush_at_exit(self) -> None:
        """The producer's last flush; a fenced or failed producer raises here too, and the error that
        stopped delivery is already reported (`self.error`)."""
        try:
            self.producer.flush(5.0)
        except KafkaException as exc:
            if self.error is None:
                self.error = FatalDeliveryError(f"flush at exit: {exc.args[0]}")
            log.warning("producer flush at exit: %s", exc.args[0])

    def _init_transactions(self) -> None:
        """Retried until it succeeds or `stop` is set (a SIGTERM while the broker is unreachable): each
        call waits one second at most (librdkafka resumes a timed-out init), so the stop is seen soon."""
        delay, started, next_log = 0.5, time.monotonic(), 0.0
        while not self.stopping.is_set():
            try:
                self.producer.init_transactions(min(1.0, self.op_timeout_s))
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    raise FatalDeliveryError(f"init_transactions: {err}") from exc
                if time.monotonic() >= next_log:
                    log.warning("init_transactions not done after %.0f s (%s); retrying",
                                time.monotonic() - started, err)
                    next_log = time.monotonic() + 30.0
                if err.code() != KafkaError._TIMED_OUT:
                    self.stopping.wait(delay)
                    delay = min(delay * 2, 10.0)

    # ---- one step -------------------------------------------------------------------
    def step(self, group_metadata=None) -> int:
        """Send every committable run; returns the number of input offsets committed."""
        self.busy = True
        try:
            ready = self.tracker.take_ready(self.max_records, self.max_bytes)  # bounds the producer's buffer
            if not ready:
                return 0
            self.busy_since = time.monotonic()
            ok = self._transaction(ready, group_metadata or self.commits.group_metadata, _Deadline(self.stuck_s)) \
                if self.exactly_once else self._at_least_once(ready)
            if not ok:
                for r in self.tracker.put_back(ready):  # revoked: their refused records' stand-ins go too
                    for rec in r.records:
                        self._replaced.pop(id(rec), None)
                return 0
            self.tracker.mark_committed(ready)
            if self.tracer is not None:  # the documents' spans end at their commit
                self.tracer.delivered(rec for r in ready for rec in r.records)
            self.metrics.delivery_step.observe(time.monotonic() - self.busy_since)
        finally:
            self.busy, self.busy_since = False, None
        n_out = sum(1 for r in ready for rec in r.records if rec.topic == self.output_topic)
        self.metrics.produced.inc(n_out)
        n_in = sum(len(r.offsets) for r in ready)
        self.metrics.committed.inc(n_in)
        return n_in

    def _produce_all(self, ready: list[Ready], deadline: _Deadline, failed: list) -> None:
        """Produce every record; delivery reports that fail are appended to `failed` as (record, error)."""
        for r in ready:
            for rec in r.records:
                self._produce(rec, deadline, failed)
            self.producer.poll(0)

    def _produce(self, rec, deadline: _Deadline, failed: list) -> None:
        orig = rec
        swap = self._replaced.get(id(rec))
        if swap is not None and swap[0] is rec:  # refused before: its dead letter goes, or nothing (skipped)
            rec = swap[1]
            if rec is None:
                return
        while True:
            value = rec.value.read() if isinstance(rec.value, Spilled) else rec.value
            report = lambda err, _msg, sent=rec: (  # noqa: E731
                failed.append((orig, sent, err)) if err is not None else None)
            try:
                self.producer.produce(rec.topic, value=value, key=rec.key, headers=list(rec.headers) or None,
                                      on_delivery=report)
                return
            except BufferError:  # the producer's queue is full: wait for deliveries, not for ever
                deadline.check("producing (the producer queue stayed full)")
                self.producer.poll(0.05)
            except KafkaException as exc:
                if exc.args[0].code() not in REFUSALS:
                    raise
                rec = self._replace(orig, rec, exc.args[0])  # refused before it left (message.max.bytes)
                if rec is None:
                    return

    def _replace(self, orig, sent, err: KafkaError):
        """What goes in place of `orig` now that `sent` (it, or its dead letter) was refused with `err`: the
        dead letter sure to fit, or None (skipped) when `sent` was that dead letter already."""
        reason = err.name().lower()
        if sent is not orig:
            self.dead_letters.skipped(sent, reason)
            self._replaced[id(orig)] = (orig, None)
            return None
        new = self.dead_letters.refused(sent, reason)
        self._replaced[id(orig)] = (orig, new)
        return new

    def _note_refused(self, failed: list) -> None:
        """Records the broker refused go as their dead letter sure to fit next time, or are skipped (or they
        would fail every retry, and hold their partition for good)."""
        for orig, sent, err in failed:
            swap = self._replaced.get(id(orig))
            current = swap[1] if swap is not None and swap[0] is orig else orig
            if err.code() in REFUSALS and current is sent:  # not handled yet (a report comes once per send)
                self._replace(orig, sent, err)

    def _delivered(self, ready: list[Ready]) -> None:
        for r in ready:
            for rec in r.records:
                self._replaced.pop(id(rec), None)

    @staticmethod
    def _offsets(ready: list[Ready]) -> list:
        return [TopicPartition(r.tp[0], r.tp[1], r.next_offset) for r in ready]

    def _transaction(self, ready: list[Ready], group_metadata, deadline: _Deadline) -> bool:
        """One transaction: the runs' records and their offsets, or nothing (abort, retry later).

        Each call waits kafka.delivery_stuck_s / 12 at most. A timed-out commit may still complete, so
        it is resumed, never aborted; an abort that times out is called again. Past the step's
        deadline (kafka.delivery_stuck_s) the worker stops: FatalDeliveryError.
        """
        if group_metadata is None:
            return False  # no assignment yet
        p = self.producer
        failed: list = []
        try:
            p.begin_transaction()
            self._produce_all(ready, deadline, failed)
            p.send_offsets_to_transaction(self._offsets(ready), group_metadata, self.op_timeout_s)
            self._commit(deadline)
            self.metrics.txn_commits.inc()
            self._delivered(ready)
            return True
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                raise FatalDeliveryError(f"transaction failed fatally: {err}") from exc
            log.warning("transaction aborted (%s); %d runs will be retried", err, len(ready))
            self._abort(deadline)
            p.poll(0)  # delivery reports of the aborted records
            self._note_refused(failed)
            time.sleep(0.2)
            return False

    def _commit(self, deadline: _Deadline) -> None:
        while True:
            try:
                self.producer.commit_transaction(self.op_timeout_s)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and not err.txn_requires_abort() and not err.fatal():
                    log.warning("commit_transaction: %s; resuming it", err)
                    deadline.check("commit_transaction")
                    continue  # resume the same commit
                raise

    def _abort(self, deadline: _Deadline) -> None:
        self.metrics.txn_aborts.inc()
        while True:
            try:
                self.producer.abort_transaction(self.op_timeout_s)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    raise FatalDeliveryError(f"abort failed fatally: {err}") from exc
                if not err.retriable():
                    log.warning("abort_transaction: %s", err)
                    return
                log.warning("abort_transaction: %s; calling it again", err)
                deadline.check("abort_transaction")

    def _at_least_once(self, ready: list[Ready]) -> bool:
        failed: list = []
        self._produce_all(ready, _Deadline(self.stuck_s), failed)
        left = self.producer.flush(self.op_timeout_s)
        if left or failed:
            log.warning("%d records unacknowledged, %d failed (%s); retrying", left, len(failed),
                        failed[0][2] if failed else "flush timeout")
            self._note_refused(failed)
            return False
        self._delivered(ready)
        self.commits.post(self._offsets(ready))  # committed by the ingest thread, which owns the consumer
        return True
