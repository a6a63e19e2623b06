"""The GPU thread with continuous batching: documents go to finishing as they finish decoding.

The hot loop reads aloud:

    (seats free?) bin = packer.next_bin() → stage → release the slot → batcher.add
    → batcher.step() → finished documents → finishing.submit_bin (at once, not when their bin ends)

Contract: the GPU stage's (worker.pipeline.gpu), with these differences:
- Owns: the engine's ContinuousBatcher (engine/continuous.py): `packer.max_seqs` seats and the token
  budget's KV rows. A bin is taken from the packer only when the batcher wants work (free seats and
  KV rows exceed what waits), without waiting while documents decode; the packer's window policy
  still decides when a bin is released.
- Hands each step's finished `(seq, result)` pairs to finishing as one batch (one wake for delivery),
  every document once; exactly-once is unchanged (finishing and the tracker see documents, not bins).
- Metrics: bins, input tokens and fill count bins taken from the packer; busy seconds are the time
  in batcher steps; bin_seconds observes each step; model documents count finished documents.
- Errors: a step that fails (not an OOM of a single document) drops every running and waiting
  document from the batcher; each runs alone (a lone failure is its result, dead-lettered by finishing).
- Shutdown: `stop` is set; documents still in the batcher are dropped uncommitted (redone after a restart).
"""

from __future__ import annotations

import logging
import time

from worker.engine.fallback import run_alone
from worker.pipeline.gpu import stage_bin
from worker.pipeline.gpu_stage import GpuStage
from worker.pipeline.inflight import Seq, mark_bin

log = logging.getLogger(__name__)


class ContinuousGpuLoop(GpuStage):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.batcher = self.engine.batcher(self.config.max_seqs, self.config.budget)
        self._since: dict[int, float] = {}  # id(seq) -> when it joined the batcher

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.metrics.gpu_heartbeat = time.monotonic()
            if self.batcher.wants_work():
                b = self.packer.next_bin(0.0 if self.batcher.busy else 0.05)
                if b is not None:
                    self.take_bin(b)
            if self.batcher.busy:
                self.step()

    def take_bin(self, b) -> None:
        seqs, seeds = self._take(b)
        now = time.monotonic()
        staged = stage_bin(self.engine, self.packer, b)
        self._count_bin(int(b.num_tokens), len(seqs))
        if staged is None:
            self._alone([(s, seed) for s, seed in zip(seqs, seeds) if s is not None], now)
            return
        for s in seqs:
            if s is not None:
                self._since[id(s)] = now
        self.batcher.add(staged, seeds, seqs, self.engine.limits(seeds))

    def step(self) -> None:
        t0 = time.monotonic()
        self.busy_since = t0
        try:
            r = self.batcher.step()
        except Exception:  # noqa: BLE001 - routed: each document of the batch goes alone
            self.metrics.model_errors.inc()
            log.exception("a continuous-batching step failed; its documents go alone")
            self._alone([(tag, seed) for tag, seed, _ in self.batcher.abort()], t0)
            self.busy_since = None
            return
        t1 = time.monotonic()
        self.busy_since = None
        m = self.metrics
        m.gpu_seconds.inc(t1 - t0)
        m.bin_seconds.observe(t1 - t0)
        if r.done:
            self._hand_back([(tag, gen) for tag, gen, _ in r.done], t1, sum(g for *_, g in r.done) / len(r.done))

    def _hand_back(self, pairs: list[tuple[Seq, object]], end: float, gpu_s: float) -> None:
        for seq, _ in pairs:
            mark_bin([seq.doc], self._since.pop(id(seq), end), end)
        self.metrics.model_documents.inc(len(pairs))
        self.finishing.submit_bin(pairs, gpu_s)

    def _alone(self, docs: list[tuple[Seq, int]], since: float) -> None:
        pairs = []
        for seq, seed in docs:
            self._since.setdefault(id(seq), since)
            pairs.append((seq, run_alone(self.engine, seq.tokens, seed)))
        if pairs:
            t1 = time.monotonic()
            self.metrics.gpu_seconds.inc(t1 - since)
            self._hand_back(pairs, t1, (t1 - since) / len(pairs))
