"""The ingest thread: it alone owns the Kafka consumer (and never touches CUDA), and runs the steps in order.

    poll and decode (worker/pipeline/source.py: records → Docs, bad ones → dead letters)
    → preprocess (digest, highlights, compaction: worker/pipeline/preprocess.py, in worker processes
      when pipeline.preprocess_processes > 0) → plan (token gate, prompt, chunks: worker/pipeline/planner.py)
    → registry.add → packer.submit_many
in digest mode (no model, no planner) → preprocess → `finished(doc, rendering)`, the finishing stage.
Between polls: the commit channel with delivery, chunked documents' combine rounds, backpressure
(worker/pipeline/backpressure.py), lag and held reports (worker/pipeline/progress.py). Rebalance
callbacks run here, inside poll. Polling goes on while partitions are paused, so the group never
sees this consumer as stuck.

Contract:
- Owns: the consumer (built on this thread by the injected `make_consumer`),
  the preprocessing pool and each document's pass (`Doc.prepared`: worker/digest/prepared.py,
  once per document, taken back in fetch order), the token gate of compaction, the planner and
  tokenizer, the registry's `add`, and the combine step of chunked documents (finishing hands a
  round back through `combine_q`); the consumer's side of the commit channel with delivery
  (worker/pipeline/commits.py: group metadata and revokes out, at_least_once offsets in).
- May block: in the poll (at most 50 ms, only with nothing fetched), in rebalance callbacks (a revoke
  waits for the pool's batches and for delivery's last transaction of those partitions; an assign asks
  the group coordinator for the committed offsets, at most 10 s), in planning, on the pool when
  nothing new was polled (or more than POOL_DEPTH batches are out).
  Never on the GPU: `packer.submit` does not wait.
- Errors: bad input goes to `DeadLetters.send` (then commits like any output); any other exception
  that one message raises goes there too, as `internal_error` (worker/pipeline/guard.py), and the
  thread goes on; a failure that is not one message's (the pool broke or stalled past
  pipeline.stall_timeout_s, the packer closed) sets `error` and the app stops the worker.
- Shutdown: `stop_polling` (drain: take no new messages), then `stop()`: the consumer closes (its revoke
  commits what is finished). Health: ready while it holds partitions and the pool is not stalled.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from confluent_kafka import KafkaException

from worker.digest.prepared import PrepareOptions
from worker.kafka.clients import Factory, start_positions
from worker.kafka.config import offset_reset
from worker.pipeline.backpressure import Backpressure, Watermarks
from worker.pipeline.commits import Commits
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import Doc
from worker.pipeline.planner import Planner, combine_text, prompt_texts
from worker.pipeline.preprocess import InOrder, Preprocessor, auto_processes, cold_pieces, start_forkserver
from worker.pipeline.lines import LineStream
from worker.pipeline.progress import ProgressReports
from worker.pipeline.source import Source
from worker.pipeline.stage import HEALTHY, Health, Shared, StageThread, run_stage
from worker.redaction import Policy

log = logging.getLogger(__name__)

MAX_ROUNDS = 8  # combine rounds of a chunked document, at most (each must shrink it)
POOL_DEPTH = 2  # poll batches in the preprocessing pool at once, while ingest polls the next
LINE_POLLS = 16  # a full poll of line records is topped up to this many polls' worth of what is fetched
COLD_FIRST = 8  # documents in the first piece of a batch split while the model waits (see _submit)


FinishedFn = Callable[[Doc, str], bool]  # Finishing.submit_finished: a document and its summary


@dataclass(frozen=True)
class IngestConfig:
    settings: object  # worker.config.settings.Settings
    watermarks: Watermarks


@dataclass(frozen=True)
class Downstream:
    """Where ingest's documents go: the packer, planned by `planner` (generative mode), or `finished`
    with their digest's rendering (digest mode: packer and planner None)."""

    packer: object = None
    planner: Planner | None = None
    finished: FinishedFn | None = None


class Ingest(StageThread):
    thread_name = "ribbon-ingest"

    def __init__(self, *, config: IngestConfig, shared: Shared, make_consumer: Factory, commits: Commits,
                 downstream: Downstream):
        planner, settings = downstream.planner, config.settings
        tracker, metrics = shared.tracker, shared.metrics
        if planner is None and downstream.finished is None:
            raise ValueError("digest mode (no planner) needs Downstream(finished=...)")
        self.finished = downstream.finished
        self.s = settings
        self.make_consumer = make_consumer  # called on this thread (worker/kafka/clients.py, or a fake)
        self.tracker, self.registry, self.packer, self.planner, self.metrics = (tracker, shared.registry,
                                                                               downstream.packer, planner, metrics)
        self.commits = commits  # the one channel with delivery (worker/pipeline/commits.py)
        self.pressure = Backpressure(config.watermarks, shared)  # pauses and resumes the assignment
        self.dead_letters = shared.dead_letters  # the one dead-letter function (worker/pipeline/deadletter.py)
        self.guard = Guard(shared.dead_letters, metrics)  # one message's exception never ends this thread
        self.combine_q: queue.SimpleQueue[Doc] = queue.SimpleQueue()
        self.stop_polling = threading.Event()  # drain: take no new messages
        self.leaving = threading.Event()       # stop(): close the consumer
        self.holds_partitions = False  # ready (/readyz) only with partitions assigned
        self.consumer = None
        self.prepare_options = PrepareOptions(
            highlights=settings.model.highlights, compaction=planner is not None and settings.digest.compaction,
            min_saving=settings.digest.min_saving, render=planner is None, redaction=Policy.of(settings.redaction))
        self.preprocess = Preprocessor(0, self.prepare_options)  # run() starts the pool, when there is one
        if auto_processes(settings.pipeline.preprocess_processes):
            start_forkserver()  # on this (lasting) thread: the forkserver's lifeline is tied to it
        self.batches: InOrder[Doc] = InOrder(self.preprocess, POOL_DEPTH)
        self.assigned, self.error = threading.Event(), None  # error: BaseException | None
        self.reports = ProgressReports(tracker, metrics, settings.kafka.hold_warning_s, shared.watch)
        self.lines = LineStream(settings, tracker=tracker, dead_letter=self._dead_letter,  # line topics: windows
                                metrics=metrics) if settings.windowing.enabled else None
        self.source = Source(settings, shared, self.lines, self.guard)  # the poll and the decoding

    # ---- the thread ---------------------------------------------------------------
    def run(self) -> None:
        run_stage(self, self._loop, log, "ingest thread", cleanup=self._close)

    def stop(self) -> None:  # the consumer closes; its revoke commits what is finished
        self.leaving.set()

    def health(self) -> Health:
        limit, waiting = self.s.pipeline.stall_timeout_s, self.batches.waiting_s()
        if waiting >= limit / 2:
            return Health(ready=False, why=f"the preprocessing pool has returned no batch for {waiting:.0f} s "
                                           f"(pipeline.stall_timeout_s {limit:.0f})")
        return HEALTHY if self.holds_partitions else Health(ready=False, why="no partitions assigned")

    def _loop(self) -> None:
        processes = auto_processes(self.s.pipeline.preprocess_processes)
        if processes:
            self.preprocess = Preprocessor(processes, self.prepare_options, self.s.pipeline.stall_timeout_s,
                                           tokenizer=self._pool_tokenizer(),
                                           max_text_bytes=self.s.pipeline.max_document_bytes)
            self.batches = InOrder(self.preprocess, POOL_DEPTH, self.s.pipeline.stall_timeout_s)
            log.info("%d preprocess processes started (pipeline.preprocess_processes)", processes)
        self.consumer = self.make_consumer()
        self.consumer.subscribe(list(self.s.kafka.input_topics), on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
        next_lag = 0.0
        while not self.leaving.is_set():
            # Delivery never calls the consumer (calls into one consumer are serialized): publish
            # the group metadata for its transactions, and commit what it delivered (at_least_once).
            self.commits.publish(self.consumer.consumer_group_metadata())
            self._commit_delivered(asynchronous=True)
            self._plan_combines()
            if self.lines is not None:  # windows that time (or a drain) closed
                self._submit(self.lines.due(self.stop_polling.is_set()))
            self._backpressure()
            if self.lines is not None:
                self.lines.hold(self.paused)  # time paused is not a key's silence (its gap)
            if time.monotonic() >= next_lag:
                self._report_lag()
                self._report_held()
                next_lag = time.monotonic() + self.s.pipeline.lag_interval_s
            # short polls while batches are in the pool: their documents go on as soon as they are back
            msgs = self.source.poll(self.consumer, 0.005 if len(self.batches) else 0.05)
            if self.lines is not None:
                msgs = self._more_lines(msgs)
            # While draining, polled messages are not registered: their offsets never commit,
            # so whoever owns the partition next gets them again.
            if msgs and not self.stop_polling.is_set():
                self._ingest(msgs)
            # polled batches come back from the pool in order; with nothing new polled, wait for them
            self._take_prepared(block=not msgs or self.stop_polling.is_set())

    def _more_lines(self, msgs: list) -> list:
        """A full poll of line records, topped up with what is already fetched (no wait), up to LINE_POLLS
        polls' worth: a line is a small share of a window, and the windows one ingest call closes go to the
        digest pool and the tokenizer as one batch instead of one window at a time."""
        chunk = msgs
        while len(chunk) >= self.source.batch and len(msgs) < LINE_POLLS * self.source.batch and \
                all(m.error() is None and self.lines.takes(m.topic()) for m in chunk):
            chunk = self.consumer.consume(num_messages=self.source.batch, timeout=0)
            msgs = msgs + chunk
        return msgs

    def _commit_delivered(self, asynchronous: bool) -> None:
        offsets = self.commits.take()
        if offsets:
            try:
                self.consumer.commit(offsets=offsets, asynchronous=asynchronous)
            except KafkaException as exc:
                log.warning("offset commit failed (%s); those outputs may repeat", exc.args[0])

    def _close(self) -> None:
        self.preprocess.close(kill=self.error is not None)
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # noqa: BLE001 - closing after a failure; nothing left to save
                log.warning("consumer close failed", exc_info=True)

    # ---- messages -----------------------------------------------------------------
    def _ingest(self, msgs: list) -> None:
        """Polled records (worker/pipeline/source.py) → documents → the preprocessing pool."""
        self._submit(self.source.documents(msgs))
        self._take_prepared(block=False)

    def _submit(self, good: list[Doc]) -> None:
        """Documents to the preprocessing pool (their passes come back in fetch order). With nothing
        upstream of the model (the pool empty, the packer holding nothing), a large batch goes in
        doubling pieces (`cold_pieces`), each taken back as soon as it is ready, so the model starts
        on the first few documents instead of waiting for the whole poll's digest and tokens."""
        if not good:
            return
        sizes = [len(good)]
        if len(good) > COLD_FIRST and not len(self.batches) and self._model_starved():
            sizes = cold_pieces(len(good), COLD_FIRST)
        start = 0
        for n in sizes:
            piece = good[start:start + n]
            start += n
            self.batches.submit(piece, [d.text for d in piece], [d.meta.get("source") for d in piece],
                                [d.meta.get("kind") for d in piece])
            if len(sizes) > 1:
                self._take_prepared(block=False)

    def _pool_tokenizer(self):
        """The planner's tokenizer backend, for the pool to count the compaction gate's tokens (None: counted
        here; a tokenizer without a Rust backend, or no compaction)."""
        if self.planner is None or not self.prepare_options.compaction:
            return None
        return getattr(self.planner.tokenizer, "backend_tokenizer", None)

    def _model_starved(self) -> bool:
        """Generative mode, and the packer holds nothing: the model waits for whatever comes next."""
        return self.planner is not None and self.packer.stats().pending_seqs == 0

    def _take_prepared(self, block: bool) -> None:
        """Every batch back from the preprocessing pool (with block, all of them), in fetch order."""
        done = self.batches.take(block)
        self.metrics.digest_wall_seconds.inc(self.batches.new_seconds())  # handing over and waiting
        for docs, preps in done:
            self._prepared(docs, preps)

    def _prepared(self, docs: list[Doc], preps: list) -> None:
        """A batch with its passes done: dead letters, token gate, plan, pack (or finish, in digest mode)."""
        good = self._passed(docs, preps)
        if not good:
            return
        if self.planner is None:  # digest mode: no model, the digest in English is the summary
            for doc in good:
                self.finished(doc, doc.prepared.summary)  # blocks while finishing is full: backpressure
            return
        batch: list[tuple[int, np.ndarray, int]] = []
        for doc, plan in self.guard.each(good, self._plan, "plan"):
            try:
                batch.extend(self._register(doc, plan))
            except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard
                self.guard.doc("register", doc, exc)
        now = time.monotonic()  # stamped first: a bin may take them before submit_many returns
        for doc in good:
            doc.packed = now
        self.packer.submit_many(batch)  # one arrival for the window: the poll's batch packs together

    def _register(self, doc: Doc, plan) -> list[tuple[int, np.ndarray, int]]:
        doc.input_tokens, doc.truncated, doc.chunks = plan.document_tokens, plan.truncated, len(plan.prompts)
        if doc.document_tokens is not None:  # None: a window kept compacted by its bytes, not counted
            doc.document_tokens = doc.document_tokens or plan.document_tokens
            self.metrics.document_tokens.inc(doc.document_tokens)
        return self._sequences(doc, plan)

    def _passed(self, docs: list[Doc], preps: list) -> list[Doc]:
        """The documents whose pass worked (each with its `prepared`); the others are dead-lettered
        (`digest_error`)."""
        self.metrics.digest_seconds.inc(sum(p.seconds for p in preps))
        ok: list[Doc] = []
        for doc, prep in zip(docs, preps):
            if prep.error is not None:
                self._dead_letter(doc.tp, doc.epoch, doc.offset, doc.key, doc.raw, "digest_error", prep.error,
                                  doc.headers)
                continue
            doc.take(prep)  # the redacted text replaces the document's (worker/redaction/)
            ok.append(doc)
        return ok

    def _plan(self, docs: list[Doc]) -> list:
        """Each document's plan (prompts, chunks), from the text its prompt is made from."""
        return self.planner.plan_many(prompt_texts(docs, self.s.digest, self.planner.count, self.metrics))

    def _sequences(self, doc: Doc, plan) -> list[tuple[int, np.ndarray, int]]:
        """Register the plan's sequences; returns (seq_id, tokens, key) to submit."""
        limit = self.planner.max_prompt_tokens
        if any(len(p) > limit for p in plan.prompts):  # the planner keeps prompts in budget: a bug, not input
            self.dead_letters.doc(doc, "oversize", f"a planned prompt exceeds {limit} tokens")
            return []
        out = []
        for sid, seq, prompt in self.registry.add(doc, list(plan.prompts), final=len(plan.prompts) == 1):
            seq.tokens = np.asarray(prompt, dtype=np.int32)  # [n] int32
            out.append((sid, seq.tokens, doc.epoch))
        return out

    def _plan_combines(self) -> None:
        while True:
            try:
                doc = self.combine_q.get_nowait()
            except queue.Empty:
                return
            if self.tracker.epoch(doc.tp) != doc.epoch:
                continue  # revoked meanwhile
            parts = [doc.parts[i] for i in sorted(doc.parts)]
            try:
                plan = self.planner.plan(combine_text(parts))
            except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard
                self.guard.doc("combine", doc, exc)
                continue
            doc.rounds += 1
            if doc.rounds > MAX_ROUNDS or len(plan.prompts) >= len(parts):
                self._dead_letter(doc.tp, doc.epoch, doc.offset, doc.key, doc.raw, "chunking_diverged",
                                  f"{len(parts)} chunk summaries did not combine within {doc.rounds} rounds",
                                  doc.headers)
                continue
            self.packer.submit_many(self._sequences(doc, plan))

    def _dead_letter(self, tp, epoch: int, offset: int, key, value, error_class: str, message: str,
                     in_headers=()) -> None:
        self.dead_letters.send(tp, epoch, offset, key, value, error_class, message, in_headers)

    def _report_lag(self) -> None:
        self.reports.lag(self.consumer)

    def _report_held(self) -> None:
        self.reports.held()

    # ---- backpressure (worker/pipeline/backpressure.py) ----------------------------
    def _backpressure(self) -> None:
        self.pressure.update(self.consumer, packer=self.packer, lines=self.lines, draining=self.stop_polling.is_set())

    @property
    def paused(self) -> bool:
        return self.pressure.paused

    # ---- rebalances (called inside poll, on this thread) --------------------------
    def _on_assign(self, consumer, partitions) -> None:
        for p in partitions:
            self.tracker.assign((p.topic, p.partition))
        if partitions:
            # librdkafka keeps a partition's pause flag across unassign and assign: a partition lost while
            # paused comes back paused, and a resume after the loss (on the empty assignment) never reaches
            # it. So every assignment sets the flag explicitly, to what backpressure wants now.
            # Each partition starts where the group committed, or where auto.offset.reset says, named
            # here so librdkafka does not wait its fixed 100 ms before looking that up (start_positions).
            partitions = start_positions(consumer, partitions, offset_reset(self.s.kafka))
            consumer.incremental_assign(partitions)
            (consumer.pause if self.paused else consumer.resume)(partitions)
            self.metrics.paused.set(len(consumer.assignment()) if self.paused else 0)
        self.assigned.set()
        self.holds_partitions = bool(partitions) or bool(consumer.assignment())
        log.info("assigned %s", [(p.topic, p.partition) for p in partitions])

    def _forget(self, partitions) -> tuple[list, set[int]]:
        tps = [(p.topic, p.partition) for p in partitions]
        epochs = {e for e in (self.tracker.epoch(tp) for tp in tps) if e is not None}
        for e in epochs:
            if self.packer is not None:
                self.packer.cancel(e)
        self.registry.drop_epochs(epochs)
        if self.lines is not None:
            self.lines.drop(tps)
        return tps, epochs

    def _on_revoke(self, consumer, partitions) -> None:
        if self.error is None:  # after a failure (a stalled pool) nothing more is taken: the worker stops
            self._take_prepared(block=True)  # what was polled before the revoke is registered first, as without a pool
        tps, _ = self._forget(partitions)
        self._not_ready_if_empty(consumer, partitions)
        # Whatever is finished for these partitions goes out (and commits) now; the rest is redone elsewhere.
        # The metadata is taken here, inside the callback: the consumer admits this re-entrant call.
        self.commits.revoke(tps, group_metadata=consumer.consumer_group_metadata())
        self._commit_delivered(asynchronous=False)
        log.info("revoked %s", tps)

    def _not_ready_if_empty(self, consumer, partitions) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        if not any((p.topic, p.partition) not in gone for p in consumer.assignment()):
            self.holds_partitions = False
        for topic, part in gone:
            for gauge in (self.metrics.lag, self.metrics.unfinished, self.metrics.held):
                try:
                    gauge.remove(topic, str(part))
                except KeyError:
                    pass

    def _on_lost(self, consumer, partitions) -> None:
        if self.error is None:
            self._take_prepared(block=True)
        tps, _ = self._forget(partitions)
        self._not_ready_if_empty(consumer, partitions)
        for tp in tps:
            self.tracker.revoke(tp)
        log.warning("lost %s: their uncommitted results are dropped", tps)
