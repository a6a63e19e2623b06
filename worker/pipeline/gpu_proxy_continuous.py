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

import time

from worker.pipeline.gpu_proxy import ProcessGpuLoop
from worker.pipeline.inflight import mark_bin


class ContinuousProcessGpuLoop(ProcessGpuLoop):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._left: dict[int, int] = {}  # bin id -> its documents not yet back
        self._sent: dict[int, float] = {}  # bin id -> when it was sent
        self._docs = 0  # documents in flight
        self._weight = 0  # their weight (prompt + reserve)

    def _next_bin(self):
        """A bin to send now, or None (the seats and the budget in flight are taken, or none due)."""
        self._freed.clear()
        if not self._may_send():
            self._freed.wait(0.01)
            return None
        return self.packer.next_bin(0.05 if not self._docs else 0.005)

    def _may_send(self) -> bool:
        with self._lock:
            docs, weight = self._docs, self._weight
        seats, budget = self.config.max_seqs, self.config.budget
        if docs < seats and weight < budget:
            return True
        return docs < 2 * seats and weight < 2 * budget and self.packer.full_bin_pending()

    def _send(self, b) -> None:
        seqs, seeds = self._take(b)
        live = [s for s in seqs if s is not None]
        now = time.monotonic()
        with self._lock:  # registered before a result can arrive
            self._sending_since = now
            try:
                bin_id = self._send_bin(b, seqs, seeds)
            finally:
                self._sending_since = None
            if live and not self._docs:
                self._progress = now  # nothing was in flight: the stall watch counts from here
            if live:
                self._inflight[bin_id] = (seqs, int(b.num_tokens))
                self._left[bin_id], self._sent[bin_id] = len(live), now
                self._docs += len(live)
                self._weight += sum(self.config.weight(s.prompt_tokens) for s in live)
                if self.busy_since is None:
                    self.busy_since = now
        self._count_bin(int(b.num_tokens), len(seqs))

    def _received(self, msg: tuple) -> None:
        if msg[0] == "docs":
            self._docs_back(*msg[1:])

    def _docs_back(self, outs: list, t0: float, t1: float, bin_errors: int, oom_splits: int, busy_s: float) -> None:
        pairs, starts = [], []
        with self._lock:
            self._progress = time.monotonic()  # documents back: the engine process makes progress
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
        self.metrics.gpu_heartbeat = time.monotonic()
        self._count_run(len(pairs), busy_s, t1 - t0, bin_errors, oom_splits)
        if not pairs:
            return
        for (seq, _), start in zip(pairs, starts):
            mark_bin([seq.doc], start, t1)
        self.finishing.submit_bin(pairs, busy_s / len(pairs))
