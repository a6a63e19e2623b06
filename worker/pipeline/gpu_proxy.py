"""The GPU stage when the model runs in its own process: a thin proxy that moves bins and results.

    bin = packer.next_bin() → copy into the pipe → release the slot → (engine process runs it)
    ("done", outputs, timings) ← pipe → finishing.submit_bin

Contract: the GPU stage's (worker.pipeline.gpu), with the model behind `EngineProcess`:
- Owns: the packer's consumer side and the bins in flight (`AHEAD + 1` at most: the one running
  there and `AHEAD` queued behind it, so the model never waits for this process between bins).
  A bin is queued behind a running one only when the packer says it already holds a full bin
  (`Packer.full_bin_pending`, a backlog: waiting would not change it); otherwise the next bin is cut
  when the running one ends, so it takes every document that arrived meanwhile instead of waiting a whole bin behind it (under a
  steady load that is about one bin time less latency; the engine then waits a few milliseconds
  for the bin, time a load below capacity has to spare).
  Nothing per document happens here; finishing is unchanged.
- Threads: `run` (the sender: packer → engine process) and a receiver it starts (engine process
  → finishing), so a slow finishing stage never delays the next bin's sending.
- May block: `packer.next_bin` and the wait for room (short timeouts, so `stop` is seen), the
  pipe, and `finishing.submit_bin` while finishing's queue is full (backpressure, as before).
- Metrics keep their meaning: busy seconds are the engine process's own time per bin (staging
  to the last output), bins, model documents, input tokens, fill, model errors (failed bins) and
  OOM splits as it counts them. `busy_since` is set while a bin is in flight; the heartbeat
  moves while nothing is, or whenever a result arrives (a model stuck under a bin stops it).
- Errors: a failed bin is retried one document at a time there; a lone failure comes back as its
  exception (finishing dead-letters it). The engine process dying (EngineProcessError) stops the
  stage with `error` set; the app stops the worker without committing more, and the bins in
  flight are redone after a restart (their offsets never committed).
- Shutdown: `stop` is set, then the packer is closed; both threads return at once. Results of
  bins in flight then are dropped (uncommitted); the engine process itself is closed by its owner.
"""

from __future__ import annotations

import logging
import threading
import time

from worker.pipeline.gpu_stage import GpuStage
from worker.pipeline.inflight import mark_bin
from worker.pipeline.stage import record_failure, run_stage
from worker.remote.process import EngineProcessError

log = logging.getLogger(__name__)


class ProcessGpuLoop(GpuStage):
    """`engine` is an EngineProcess (worker/remote/process.py)."""

    AHEAD = 1  # bins queued there behind the running one

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._room = threading.Semaphore(self.AHEAD + 1)
        self._freed = threading.Event()  # a result arrived: the model may be free
        self._lock = threading.Lock()
        self._inflight: dict[int, tuple[list, int]] = {}  # bin id -> (seqs, input tokens)
        # no result for this long with bins in flight: the engine process is killed (the app sets it from
        # pipeline.stall_timeout_s; None: never)
        self.stall_s: float | None = None
        self._progress = time.monotonic()  # the last result, or the send that found nothing in flight
        self._sending_since: float | None = None  # a send under way (it blocks while the engine's pipe is full)

    # ---- the two threads, each under the stage contract ------------------------------------------
    def run(self) -> None:
        """The sender (this thread) and the receiver it starts; the first failure of either stops both."""
        rx = threading.Thread(target=run_stage, args=(self, self._receive, log, "gpu stage"),
                              kwargs={"traceback": False}, name="ribbon-gpu-results", daemon=True)
        rx.start()
        run_stage(self, self._send_loop, log, "gpu stage", traceback=False)
        rx.join(1.0)

    def _send_loop(self) -> None:
        while not self.stop.is_set() and self.error is None:
            if not self._inflight:
                self.metrics.gpu_heartbeat = time.monotonic()
            b = self._next_bin()
            if b is not None:
                self._send(b)

    def _receive(self) -> None:
        while not self.stop.is_set() and self.error is None:
            msg = self.engine.receive(0.05)
            if msg is not None:
                self._received(msg)
            else:
                self._idle()

    # ---- sending: when to cut a bin, and the send ----------------------------------------------
    def _next_bin(self):
        """A bin to send now, or None (no room, not a backlog while a bin runs, or none due)."""
        if not self._room.acquire(timeout=0.05):
            return None
        self._freed.clear()
        if self._inflight and not self.packer.full_bin_pending():
            self._room.release()  # not a backlog: cut the next bin when the model is free
            self._freed.wait(0.01)
            return None
        b = self.packer.next_bin(0.05)
        if b is None:
            self._room.release()
        return b

    def _send(self, b) -> None:
        seqs, seeds = self._take(b)
        with self._lock:  # registered before the result can arrive
            self._sending_since = time.monotonic()
            try:
                bin_id = self._send_bin(b, seqs, seeds)
            finally:
                self._sending_since = None
            if not self._inflight:
                self._progress = time.monotonic()
            self._inflight[bin_id] = (seqs, int(b.num_tokens))
            if self.busy_since is None:
                self.busy_since = time.monotonic()

    def _send_bin(self, b, seqs: list, seeds: list[int]) -> int:
        """The bin into the engine process's pipe; its slot released once copied. Returns its id there."""
        try:
            return self.engine.send_bin(b.tokens, b.cu_seqlens, int(b.max_seqlen), seeds,
                                        [s is not None for s in seqs])
        finally:
            self.packer.release(b.slot)  # send_bin copied the slot

    # ---- receiving -------------------------------------------------------------------------------
    def _received(self, msg: tuple) -> None:
        if msg[0] == "done":
            self._done(*msg[1:])

    def _idle(self) -> None:
        """No message this while: a stall past `stall_s` kills the engine process."""
        if self.stall_s is not None and self.stalled_s() >= self.stall_s:
            self._stalled()

    def stalled_s(self) -> float:
        """Seconds without a result while bins are in flight or one is being sent (0 when neither). No lock:
        the sender holds it while a send blocks on a full pipe, and that is a stall to see."""
        waits = [t for t in (self._sending_since, self._progress if self._inflight else None) if t is not None]
        return time.monotonic() - min(waits) if waits else 0.0

    def _stalled(self) -> None:
        """The engine process stopped making progress: kill it (a send blocked on its full pipe then fails,
        and nothing waits on it at exit) and stop the stage."""
        pid = getattr(getattr(self.engine, "proc", None), "pid", None)
        stall = EngineProcessError(f"the engine process (pid {pid}) returned no bin for {self.stall_s:.0f} s "
                                   "(pipeline.stall_timeout_s): it was killed")
        record_failure(self, stall, log, "gpu stage", traceback=False)  # first: the reason that stays
        self.engine.kill()

    def _done(self, bin_id: int, outs: list, t0: float, t1: float, bin_errors: int, oom_splits: int) -> None:
        with self._lock:
            self._progress = time.monotonic()
            entry = self._inflight.pop(bin_id, None)
            if entry is None:
                return  # a bin of an earlier stage on the same engine process (benchmarks)
            self.busy_since = t1 if self._inflight else None  # the next bin was queued there: it started at t1
        self._room.release()
        self._freed.set()
        seqs, num_tokens = entry
        self.metrics.gpu_heartbeat = time.monotonic()
        mark_bin([s.doc for s in seqs if s is not None], t0, t1)
        self._count_bin(num_tokens, len(seqs))
        self._count_run(len(seqs), t1 - t0, t1 - t0, bin_errors, oom_splits)
        self.finishing.submit_bin(list(zip(seqs, outs)), (t1 - t0) / max(1, len(seqs)))

    def _count_run(self, n: int, busy_s: float, span_s: float, bin_errors: int, oom_splits: int) -> None:
        """What one message of the engine process reports: `n` documents back, `busy_s` of the model's
        time, a step (or bin) of `span_s`, failed bins, and its OOM splits so far."""
        m = self.metrics
        m.model_documents.inc(n)
        m.gpu_seconds.inc(busy_s)
        m.bin_seconds.observe(span_s)
        if bin_errors:
            m.model_errors.inc(bin_errors)
        # the engine process's count, over every stage it served
        self.engine.stats["oom_splits"] = self._count_oom_splits(oom_splits, self.engine.stats["oom_splits"])
