"""The GPU stage: one stage over two seams, a runner and a batching policy, composed.

    runner (worker/pipeline/gpu_runners.py)     the model in this process | in the engine process
    policy (worker/pipeline/gpu_batching.py)    a bin at a time | continuous batching

The hot loop reads aloud:

    room = runner.room(flight) → bin = packer.bin_for(room) → id = runner.reserve() → flight.add(id)
         → runner.put(id, bin) → release the slot
    msg = runner.take() → the documents back → finishing.submit_bin (each document once)

Contract (the stage contract of worker/pipeline/stage.py, kept once for all four combinations):
- Owns: the packer's consumer side (`bin_for`, `release`; the packer decides when a bin is cut,
  worker/packer/room.py), the runner, and what is in flight (worker/pipeline/gpu_flight.py). Nothing
  per document happens here: finishing builds outputs and dead letters.
- Threads: one (the model in this process: it alone owns CUDA; put and take alternate), or a sender
  and a receiver (the engine process); plus a watch thread when `stall_s` is set.
- Lock: it guards the flight alone (a bin registered, a document taken back); no call into the runner
  is made under it. A bin is registered under the id the runner reserved before its write begins, so
  a result back before the write returns finds it, and neither results, their hand-off to finishing
  nor `health` wait behind a slow write to the engine process.
- Stall watch: `stalled_s()` counts from the last progress (a result back, a hand-off to finishing
  done, or a bin handed over when nothing was in flight), while documents are in flight or a bin is
  being handed over (a send blocks while the engine's pipe is full); 0 while the stage itself waits
  on finishing (that is finishing's backpressure, not the model's stall). `health()` is not ready
  from half of `stall_s` on; at `stall_s` the watch records the failure naming the setting and kills
  the runner (the engine process; a model in this process cannot be killed, and `join` then no longer
  waits for it): the app stops the worker, exit 1, nothing more committed.
- May block: `packer.bin_for` and waits for room (short timeouts, so `stop` is seen), the model or
  the pipe, and `finishing.submit_bin` while finishing's queue is full (backpressure).
- Metrics (the same meaning in each combination): bins, input tokens and fill when a bin is handed
  over; model documents, busy seconds (the model's own time), bin_seconds (one bin, or one step),
  model errors and OOM splits as results come back. `busy_since` is set while documents are in flight.
- Errors: a failed bin or step is retried one document at a time by the model's side; a lone failure
  comes back as its exception (finishing dead-letters it). The engine process dying, or any other
  exception, stops the stage with `error` set.
- Shutdown: `stop()` takes no new bin and closes the packer; results of documents in flight are
  still handed to finishing for up to `drain_s` (or until finishing refuses them); then the threads
  return. Anything not handed over is not committed (redone after a restart).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from worker.errors import RibbonError
from worker.packer.config import PackerConfig
from worker.pipeline.gpu_flight import Flight
from worker.pipeline.inflight import Seq, mark_bin, mark_phases
from worker.pipeline.stage import HEALTHY, Health, Shared, record_failure, run_stage

log = logging.getLogger(__name__)

STALL_SETTING = "pipeline.stall_timeout_s (RIBBON_PIPELINE__STALL_TIMEOUT_S)"


class BinSink(Protocol):
    """Where finished documents go (worker.pipeline.finishing.Finishing)."""

    def submit_bin(self, pairs, gpu_s_per_doc: float) -> bool: ...


class GpuStalled(RibbonError, RuntimeError):
    """The model returned nothing for pipeline.stall_timeout_s with documents in flight."""


@dataclass(frozen=True)
class GpuConfig:
    packer: PackerConfig
    seed: int = 0  # base of each document's sampling seed (its id decides the rest)
    stall_s: float | None = None  # pipeline.stall_timeout_s; None: no stall watch
    drain_s: float = 5.0  # on stop, results of documents in flight are handed over this long at most


class GpuStage:
    thread_name = "ribbon-gpu"

    def __init__(self, *, runner, packer, shared: Shared, finishing: BinSink, config: GpuConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runner, self.packer, self.finishing, self.config, self.clock = runner, packer, finishing, config, clock
        self.registry, self.metrics = shared.registry, shared.metrics
        self.flight = Flight(config.packer)
        self.error: BaseException | None = None
        self.busy_since: float | None = None  # documents in flight since (the e2e benchmark's timeline)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._freed = threading.Event()  # a result arrived: the model may have room
        self._deadline = float("inf")  # set by stop(): the end of the hand-over of what is in flight (real time)
        self._progress = clock()
        self._sending_since: float | None = None
        self._handing = False
        self._abandoned = False  # the runner stalled and could not be killed: join no longer waits
        self._threads: list[threading.Thread] = []
        self._oom_seen = int(getattr(runner.engine, "stats", {}).get("oom_splits", 0))

    # ---- the stage contract ----------------------------------------------------------------------
    def start(self) -> None:
        t = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self._threads.append(t)
        t.start()

    def run(self) -> None:
        """The body: the loop (sender, or put-and-take in one thread), with a receiver and a watch beside it."""
        side = []
        if self.runner.concurrent:
            side.append(threading.Thread(target=run_stage, args=(self, self._receive_loop, log, "gpu stage"),
                                         kwargs={"traceback": False}, name="ribbon-gpu-results", daemon=True))
        if self.config.stall_s is not None:
            side.append(threading.Thread(target=self._watch, name="ribbon-gpu-watch", daemon=True))
        self._threads += side
        for t in side:
            t.start()
        body = self._send_loop if self.runner.concurrent else self._loop
        run_stage(self, body, log, "gpu stage", traceback=not self.runner.concurrent)

    def stop(self) -> None:
        if not self._stopping.is_set():
            self._deadline = time.monotonic() + self.config.drain_s
            self._stopping.set()
        self.packer.close()

    def join(self, timeout_s: float) -> bool:
        """Wait for the threads; at once when the runner stalled and could not be killed."""
        end = time.monotonic() + timeout_s
        for t in list(self._threads):
            if self._abandoned:
                break
            t.join(max(0.0, end - time.monotonic()))
        return self._abandoned or not any(t.is_alive() for t in self._threads)

    def health(self) -> Health:
        """Not ready from half of stall_s without progress; not live past all of it."""
        limit = self.config.stall_s
        stalled = self.stalled_s()
        if limit is None or stalled < limit / 2:
            return HEALTHY
        why = f"{self.runner.name} has returned nothing for {stalled:.0f} s ({STALL_SETTING} {limit:.0f})"
        return Health(live=stalled < limit, ready=False, why=why)

    def stalled_s(self) -> float:
        """Seconds without progress while documents are in flight or a bin is being handed over (0 when
        neither, or while waiting on finishing). No lock: it reads three fields, whatever the threads do."""
        if self._handing:
            return 0.0
        waits = [t for t in (self._sending_since, self._progress if self.flight.docs else None) if t is not None]
        return self.clock() - min(waits) if waits else 0.0

    # ---- the loops -------------------------------------------------------------------------------
    def _loop(self) -> None:
        """The model in this process: hand over a bin if it has room, then run it (one bin, or one step)."""
        while self._running():
            if not self._stopping.is_set():
                self._feed(0.0 if self.flight.docs else 0.05)
            msg = self.runner.take(0.0)
            if msg is not None:
                self._back(msg)

    def _send_loop(self) -> None:
        while not self._stopping.is_set() and self.error is None:
            self._freed.clear()
            if not self._feed(0.005 if self.flight.docs else 0.05):
                self._freed.wait(0.01)

    def _receive_loop(self) -> None:
        while self._running():
            msg = self.runner.take(0.05)
            if msg is not None:
                self._back(msg)

    def _running(self) -> bool:
        """Not failed; not stopped, or stopped with documents in flight before the drain's end."""
        if self.error is not None:
            return False
        return not self._stopping.is_set() or (self.flight.docs > 0 and time.monotonic() < self._deadline)

    def _watch(self) -> None:
        limit = float(self.config.stall_s)
        while not self._stopping.wait(min(0.05, limit / 20)) and self.error is None:
            if self.stalled_s() >= limit:
                self._stalled(limit)
                return

    def _stalled(self, limit: float) -> None:
        """The stall recorded first (the first failure is the one the worker reports: the runner's death that
        the kill causes must not take its place), then the runner killed."""
        then = "it was killed" if self.runner.killable else "the worker exits 1"
        record_failure(self, GpuStalled(f"{self.runner.name} returned nothing for {limit:.0f} s with documents in flight "
                                        f"({STALL_SETTING}): {then}"), log, "gpu stage", traceback=False)
        self._abandoned = not self.runner.kill()

    # ---- handing bins over -----------------------------------------------------------------------
    def _feed(self, wait_s: float) -> bool:
        """A bin to the runner if the model has room and the packer cuts one; False if none went."""
        b = self.packer.bin_for(self.runner.room(self.flight), wait_s)
        if b is None:
            return False
        seqs = [self.registry.pop(int(sid)) for sid in b.seq_ids]  # None: dropped by a revoke
        seeds = [s.doc.seed(self.config.seed, s.index) if s is not None else 0 for s in seqs]
        now, t = self.clock(), time.monotonic()  # the watch's clock; the model's times (one clock per host)
        bin_id = self.runner.reserve()
        with self._lock:  # registered under its id before the write: its result, however early, finds it
            idle = not self.flight.docs
            if self.flight.add(bin_id, seqs, t) and idle:
                self._progress, self.busy_since = now, t  # nothing was in flight: the watch counts from here
        self._sending_since = now  # outside the lock: a slow write holds up no result and no probe
        try:
            self.runner.put(bin_id, b, seqs, seeds, t)
        finally:
            self._sending_since = None
            self.packer.release(b.slot)  # staged or copied into the pipe
        self._count_bin(int(b.num_tokens), len(seqs))
        return True

    def _count_bin(self, num_tokens: int, n: int) -> None:
        m = self.metrics
        m.bin_fill.observe(self.config.packer.fill(num_tokens, n))
        m.bins.inc()
        m.input_tokens.inc(num_tokens)

    # ---- results back ----------------------------------------------------------------------------
    def _back(self, msg: tuple) -> None:
        """One message of the model: its documents to finishing (each once), its counts to the metrics."""
        phases = None
        if msg[0] == "done":  # ("done", bin_id, outputs, t0, t1, bin_errors, oom_splits[, phases]): a whole bin
            _, bin_id, outs, t0, t1, errors, ooms, *rest = msg
            items, busy_s, whole, phases = [(bin_id, i, o) for i, o in enumerate(outs)], t1 - t0, True, \
                (rest[0] if rest else None)
        else:  # ("docs", [(bin_id, index, output)], t0, t1, bin_errors, oom_splits, busy_s): as they finish
            _, items, t0, t1, errors, ooms, busy_s = msg
            whole = False
        pairs: list[tuple[Seq, object]] = []
        with self._lock:
            self._progress = self.clock()
            for bin_id, i, out in items:
                got = self.flight.back(bin_id, i)
                if got is not None:
                    pairs.append((got[0], out))
                    mark_bin([got[0].doc], t0 if whole else got[1], t1)
            self.busy_since = t1 if self.flight.docs else None
        self._freed.set()
        if not pairs:
            return  # another stage's, on the same engine process (benchmarks)
        if phases is not None:  # the bin's prefill and decode seconds, shared over its documents (traces)
            mark_phases([seq.doc for seq, _ in pairs], *phases)
        self._count_run(len(pairs), busy_s, t1 - t0, errors, ooms)
        self._handing = True
        try:
            if not self.finishing.submit_bin(pairs, busy_s / len(pairs)):
                self._deadline = float("-inf")  # finishing has stopped: nothing more to hand over
        finally:
            self._progress = self.clock()
            self._handing = False

    def _count_run(self, n: int, busy_s: float, span_s: float, bin_errors: int, oom_splits: int) -> None:
        """`n` documents back, `busy_s` of the model's time, a bin (or step) of `span_s`, failed bins, and
        the engine's OOM splits so far (its own running total, over every stage it served)."""
        m = self.metrics
        m.model_documents.inc(n)
        m.gpu_seconds.inc(busy_s)
        m.bin_seconds.observe(span_s)
        if bin_errors:
            m.model_errors.inc(bin_errors)
        if oom_splits > self._oom_seen:
            m.oom_splits.inc(oom_splits - self._oom_seen)
            self._oom_seen = oom_splits
