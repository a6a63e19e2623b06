"""The GPU stage's proxy when the engine process batches continuously: results come back per document.

    bin = packer.next_bin() → copy into the pipe → release the slot → (the engine process admits it
    as seats free up) ... ("docs", finished documents) ← pipe → finishing.submit_bin, per step

Contract: ProcessGpuLoop's (worker.pipeline.gpu_proxy), with these differences:
- In flight is counted in documents and weight, not bins: a bin is sent while the documents in
  flight are fewer than the seats (`packer.max_seqs`) and their weight below the token budget
  (seats are free there: the packer's window policy decides how full the bin is), or, when the
  packer already holds a full bin (a backlog), while they are fewer than twice that (one bin
  waits there, so freed seats are refilled without a round trip).
- A document's result goes to finishing when its "docs" message arrives, not when its bin ends;
  each document once, so finishing, the tracker and exactly-once are unchanged.
- Metrics: bins, input tokens and fill are counted when a bin is sent; busy seconds are the engine
  process's time in steps (reported with each "docs" message); bin_seconds observes the span of
  each message's step; model documents count finished documents.
"""

from __future__ import annotations

import threading
import time

from worker.pipeline.inflight import mark_bin
from worker.pipeline.gpu_proxy import ProcessGpuLoop


class ContinuousProcessGpuLoop(ProcessGpuLoop):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._left: dict[int, int] = {}  # bin id -> its documents not yet back
        self._sent: dict[int, float] = {}  # bin id -> when it was sent
        self._docs = 0  # documents in flight
        self._weight = 0  # their weight (prompt + reserve)

    def run(self) -> None:
        rx = threading.Thread(target=self._receive, name="ribbon-gpu-results", daemon=True)
        rx.start()
        try:
            while not self.stop.is_set() and self.error is None:
                if not self._inflight:
                    self.metrics.gpu_heartbeat = time.monotonic()
                self._freed.clear()
                if not self._may_send():
                    self._freed.wait(0.01)
                    continue
                b = self.packer.next_bin(0.05 if not self._docs else 0.005)
                if b is not None:
                    self._send(b)
        except BaseException as exc:  # noqa: BLE001 - reported to the app, which stops the worker
            self._fail(exc)
        rx.join(1.0)

    def _may_send(self) -> bool:
        with self._lock:
            docs, weight = self._docs, self._weight
        seats, budget = self.config.max_seqs, self.config.budget
        if docs < seats and weight < budget:
            return True
        return docs < 2 * seats and weight < 2 * budget and self.packer.full_bin_pending()

    def _send(self, b) -> None:
        seqs = [self.registry.pop(int(sid)) for sid in b.seq_ids]
        seeds = [s.doc.seed(self.seed, s.index) if s is not None else 0 for s in seqs]
        live = [s for s in seqs if s is not None]
        now = time.monotonic()
        with self._lock:  # registered before a result can arrive
            try:
                bin_id = self.engine.send_bin(b.tokens, b.cu_seqlens, int(b.max_seqlen), seeds,
                                              [s is not None for s in seqs])
            finally:
                self.packer.release(b.slot)  # send_bin copied the slot
            if live:
                self._inflight[bin_id] = (seqs, int(b.num_tokens))
                self._left[bin_id], self._sent[bin_id] = len(live), now
                self._docs += len(live)
                self._weight += sum(self.config.weight(s.prompt_tokens) for s in live)
                if self.busy_since is None:
                    self.busy_since = now
        m = self.metrics
        m.bin_fill.observe(self.config.fill(int(b.num_tokens), len(seqs)))
        m.bins.inc()
        m.input_tokens.inc(int(b.num_tokens))

    def _receive(self) -> None:
        try:
            while not self.stop.is_set() and self.error is None:
                msg = self.engine.receive(0.05)
                if msg is not None and msg[0] == "docs":
                    self._docs_back(*msg[1:])
        except BaseException as exc:  # noqa: BLE001 - reported to the app, which stops the worker
            self._fail(exc)

    def _docs_back(self, outs: list, t0: float, t1: float, bin_errors: int, oom_splits: int, busy_s: float) -> None:
        pairs, starts = [], []
        with self._lock:
            for bin_id, i, out in outs:
                entry = self._inflight.get(bin_id)
                if entry is None:
                    continue  # a bin of an earlier stage on the same engine process (benchmarks)
                seq = entry[0][i]
                pairs.append((seq, out))
                starts.append(self._sent[bin_id])
                self._docs -= 1
                self._weight -= self.config.weight(seq.prompt_tokens)
                self._left[bin_id] -= 1
                if not self._left[bin_id]:
                    del self._inflight[bin_id], self._left[bin_id], self._sent[bin_id]
            self.busy_since = t1 if self._docs else None
        self._freed.set()
        m = self.metrics
        m.gpu_heartbeat = time.monotonic()
        m.gpu_seconds.inc(busy_s)
        m.bin_seconds.observe(t1 - t0)
        if bin_errors:
            m.model_errors.inc(bin_errors)
        seen = self.engine.stats["oom_splits"]
        if oom_splits > seen:
            m.oom_splits.inc(oom_splits - seen)
            self.engine.stats["oom_splits"] = oom_splits
        if not pairs:
            return
        for (seq, _), start in zip(pairs, starts):
            mark_bin([seq.doc], start, t1)
        m.model_documents.inc(len(pairs))
        self.finishing.submit_bin(pairs, busy_s / len(pairs))
