"""The ingest thread: it alone owns the Kafka consumer (and never touches CUDA), and runs the steps in order.

    poll and decode (worker/pipeline/source.py: records → Docs, bad ones → dead letters)
    → preprocess (digest, highlights, compaction: worker/pipeline/preprocess.py, in worker processes
      when pipeline.preprocess_processes > 0) → plan (token gate, prompt, chunks: worker/pipeline/planner.py)
    → registry.add → packer.submit_many
in digest mode (no model, no planner) → preprocess → `finished(doc, rendering)`, the finishing stage.
Between polls: the commit channel with delivery, chunked documents' combine rounds
(worker/pipeline/rounds.py), backpressure (worker/pipeline/backpressure.py), lag and held reports
(worker/pipeline/progress.py). Rebalance callbacks (worker/pipeline/rebalance.py) run here, inside poll.
Polling goes on while partitions are paused, so the group never sees this consumer as stuck.

Contract:
- Owns: the consumer (built on this thread by the injected `make_consumer`),
  the preprocessing pool and each document's pass (`Doc.prepared`: worker/digest/prepared.py,
  once per document, taken back in fetch order), the token gate of compaction, the planner and
  tokenizer, the registry's `add` and the combine rounds of chunked documents (`rounds`: finishing hands
  a round back through `rounds.put`), the rebalance callbacks (`rebalance`); the consumer's side of the
  commit channel with delivery (worker/pipeline/commits.py: group metadata and revokes out, at_least_once
  offsets in).
- May block: in the poll (at most 50 ms, only with nothing fetched), in rebalance callbacks (the pool's
  batches, delivery's last transaction, the committed offsets: worker/pipeline/rebalance.py), in
  planning, on the pool when nothing new was polled (or more than POOL_DEPTH batches are out).
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
import threading
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException

from worker.digest.prepared import PrepareOptions
from worker.kafka.clients import Factory
from worker.pipeline.backpressure import Backpressure, Watermarks
from worker.pipeline.commits import Commits
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import Doc
from worker.pipeline.preprocess import InOrder, Preprocessor, auto_processes, cold_pieces, start_forkserver
from worker.pipeline.lines import LineStream
from worker.pipeline.progress import ProgressReports
from worker.pipeline.rebalance import Rebalance
from worker.pipeline.rounds import Downstream, Rounds
from worker.pipeline.source import Source
from worker.pipeline.stage import HEALTHY, Health, Shared, StageThread, run_stage
from worker.redaction import Policy

log = logging.getLogger(__name__)

POOL_DEPTH = 2  # poll batches in the preprocessing pool at once, while ingest polls the next
COLD_FIRST = 8  # documents in the first piece of a batch split while the model waits (see _submit)


@dataclass(frozen=True)
class IngestConfig:
    watermarks: Watermarks
    input_topics: tuple[str, ...]  # kafka.input_topics
    offset_reset: str  # where a partition without a commit starts (worker/kafka/config.offset_reset)
    poll_batch: int  # pipeline.poll_batch
    max_message_bytes: int  # kafka.max_message_bytes
    lag_interval_s: float  # LAG_INTERVAL_S (worker/pipeline/configs.py)
    hold_warning_s: float  # kafka.delivery_stuck_s
    stall_timeout_s: float  # pipeline.stall_timeout_s
    preprocess_processes: int | str  # pipeline.preprocess_processes
    max_document_bytes: int  # pipeline.max_document_bytes
    highlights: int  # digest.highlights
    redaction: Policy  # the redaction settings' policy
    digest: object  # the `digest` settings group (compaction, the prompt's text)
    windowing: object = None  # the `windowing` settings group when enabled, else None


class Ingest(StageThread):
    thread_name = "ribbon-ingest"

    def __init__(self, *, config: IngestConfig, shared: Shared, make_consumer: Factory, commits: Commits,
                 downstream: Downstream):
        planner = downstream.planner
        tracker, metrics = shared.tracker, shared.metrics
        if planner is None and downstream.finished is None:
            raise ValueError("digest mode (no planner) needs Downstream(finished=...)")
        self.config = config
        self.make_consumer = make_consumer  # called on this thread (worker/kafka/clients.py, or a fake)
        self.tracker, self.registry, self.packer, self.planner, self.metrics = (tracker, shared.registry,
                                                                               downstream.packer, planner, metrics)
        self.commits = commits  # the one channel with delivery (worker/pipeline/commits.py)
        self.pressure = Backpressure(config.watermarks, shared)  # pauses and resumes the assignment
        self.dead_letters = shared.dead_letters  # the one dead-letter function (worker/pipeline/deadletter.py)
        self.guard = Guard(shared.dead_letters, metrics)  # one message's exception never ends this thread
        self.rounds = Rounds(shared, self.guard, downstream, digest=config.digest)  # passes → plans → packer
        self.stop_polling = threading.Event()  # drain: take no new messages
        self.leaving = threading.Event()       # stop(): close the consumer
        self.consumer = None
        self.prepare_options = PrepareOptions(
            highlights=config.highlights, compaction=planner is not None and config.digest.compaction,
            min_saving=config.digest.min_saving, render=planner is None, redaction=config.redaction)
        self.preprocess = Preprocessor(0, self.prepare_options)  # run() starts the pool, when there is one
        if auto_processes(config.preprocess_processes):
            start_forkserver()  # on this (lasting) thread: the forkserver's lifeline is tied to it
        self.batches: InOrder[Doc] = InOrder(self.preprocess, POOL_DEPTH)
        self.error = None  # BaseException | None
        self.reports = ProgressReports(tracker, metrics, config.hold_warning_s, shared.watch)
        self.lines = LineStream(config, tracker=tracker, dead_letter=self.dead_letters.send,  # line windows
                                metrics=metrics) if config.windowing is not None else None
        self.source = Source(config, shared, self.lines, self.guard)  # the poll and the decoding
        self.rebalance = Rebalance(shared, self, packer=downstream.packer, lines=self.lines,
                                   reset=config.offset_reset)  # its callbacks run inside poll

    @property
    def assigned(self) -> threading.Event:
        """Set at the first assignment."""
        return self.rebalance.assigned

    # ---- the thread ---------------------------------------------------------------
    def run(self) -> None:
        run_stage(self, self._loop, log, "ingest thread", cleanup=self._close)

    def stop(self) -> None:  # the consumer closes; its revoke commits what is finished
        self.leaving.set()

    def health(self) -> Health:
        limit, waiting = self.config.stall_timeout_s, self.batches.waiting_s()
        if waiting >= limit / 2:
            return Health(ready=False, why=f"the preprocessing pool has returned no batch for {waiting:.0f} s "
                                           f"(pipeline.stall_timeout_s {limit:.0f})")
        return HEALTHY if self.rebalance.holds_partitions else Health(ready=False, why="no partitions assigned")

    def _loop(self) -> None:
        c = self.config
        processes = auto_processes(c.preprocess_processes)
        if processes:
            self.preprocess = Preprocessor(processes, self.prepare_options, c.stall_timeout_s,
                                           tokenizer=self._pool_tokenizer(), max_text_bytes=c.max_document_bytes)
            self.batches = InOrder(self.preprocess, POOL_DEPTH, c.stall_timeout_s)
            log.info("%d preprocess processes started (pipeline.preprocess_processes)", processes)
        self.consumer = self.make_consumer()
        r = self.rebalance
        self.consumer.subscribe(list(c.input_topics), on_assign=r.on_assign, on_revoke=r.on_revoke,
                                on_lost=r.on_lost)
        next_lag = 0.0
        while not self.leaving.is_set():
            # Delivery never calls the consumer (calls into one consumer are serialized): publish
            # the group metadata for its transactions, and commit what it delivered (at_least_once).
            self.commits.publish(self.consumer.consumer_group_metadata())
            self.commit_delivered(asynchronous=True)
            self.rounds.combine()
            if self.lines is not None:  # windows that time (or a drain) closed
                self._submit(self.lines.due(self.stop_polling.is_set()))
            self._backpressure()
            if self.lines is not None:
                self.lines.hold(self.paused)  # time paused is not a key's silence (its gap)
            if time.monotonic() >= next_lag:
                self.reports.lag(self.consumer)
                self.reports.held()
                next_lag = time.monotonic() + c.lag_interval_s
            # short polls while batches are in the pool: their documents go on as soon as they are back
            msgs = self.source.poll(self.consumer, 0.005 if len(self.batches) else 0.05)
            if self.lines is not None:
                msgs = self.source.more_lines(self.consumer, msgs)
            # While draining, polled messages are not registered: their offsets never commit,
            # so whoever owns the partition next gets them again.
            if msgs and not self.stop_polling.is_set():
                self._ingest(msgs)
            # polled batches come back from the pool in order; with nothing new polled, wait for them
            self._take_prepared(block=not msgs or self.stop_polling.is_set())

    def commit_delivered(self, asynchronous: bool) -> None:
        """The offsets delivery posted (at_least_once), committed; called by the loop and by a revoke."""
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
                                [d.meta.get("kind") for d in piece], [d.window is not None for d in piece])
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

    def settle(self) -> None:
        """Every batch out in the preprocessing pool taken back and registered, unless the stage failed (a
        stalled pool: nothing more is taken, the worker stops); a rebalance callback's first step."""
        if self.error is None:
            self._take_prepared(block=True)

    def _take_prepared(self, block: bool) -> None:
        """Every batch back from the preprocessing pool (with block, all of them), in fetch order."""
        done = self.batches.take(block)
        self.metrics.digest_wall_seconds.inc(self.batches.new_seconds())  # handing over and waiting
        for docs, preps in done:
            self.rounds.prepared(docs, preps)

    # ---- backpressure (worker/pipeline/backpressure.py) ----------------------------
    def _backpressure(self) -> None:
        self.pressure.update(self.consumer, packer=self.packer, lines=self.lines, draining=self.stop_polling.is_set())

    @property
    def paused(self) -> bool:
        return self.pressure.paused
