"""The GPU thread: it alone owns CUDA and the model, and runs bins and nothing else.

The hot loop reads aloud:

    bin = packer.next_bin() → stage (H2D) → release the slot once copied → generate → finishing.submit_bin

Contract:
- Owns: the engine (CUDA, the model, its KV pool and decode graphs, all set up
  at start by `Engine.warm_up` in `build_parts`, before the first bin) and the
  packer's consumer side (`next_bin`, `release`).
- Hands every bin's `(seq, result)` pairs to the finishing stage; nothing per
  document (outputs, encoding, dead letters, chunk hand-back) happens here.
- May block: in `packer.next_bin` (GIL released, short timeout so `stop` is
  seen), in the model, and in `finishing.submit_bin` while finishing's bounded
  queue is full (backpressure: the GPU never runs ahead of finishing by more
  than its capacity).
- Errors: a bin that fails (not an OOM: the engine splits those itself) is
  retried one document at a time; a document that fails alone travels to
  finishing as its exception, and finishing dead-letters it. Anything else
  stops the thread with `error` set (the app stops the worker).
- Shutdown: `stop` is set, then the packer is closed (which wakes `next_bin`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from worker.engine.fallback import as_tensor, generate_or_alone
from worker.packer.config import PackerConfig
from worker.pipeline.inflight import DocRegistry, Seq, mark_bin, mark_phases

log = logging.getLogger(__name__)


class BinSink(Protocol):
    """Where finished bins go (worker.pipeline.finishing.Finishing)."""

    def submit_bin(self, pairs, gpu_s_per_doc: float) -> bool: ...


class GpuLoop:
    def __init__(self, *, engine, packer, registry: DocRegistry, finishing: BinSink, metrics, config: PackerConfig,
                 seed: int = 0) -> None:
        self.engine, self.packer, self.registry, self.finishing = engine, packer, registry, finishing
        self.metrics, self.config, self.seed = metrics, config, seed
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.busy_since: float | None = None
        self._oom_seen = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.metrics.gpu_heartbeat = time.monotonic()
                b = self.packer.next_bin(0.05)
                if b is not None:
                    self.run_bin(b)
        except BaseException as exc:  # noqa: BLE001 - reported to the app, which stops the worker
            self.error = exc
            log.exception("gpu thread failed")

    def run_bin(self, b) -> None:
        seqs = [self.registry.pop(int(sid)) for sid in b.seq_ids]
        t0 = time.monotonic()
        self.busy_since = t0
        try:
            staged = self.engine.stage(as_tensor(b.tokens), as_tensor(b.cu_seqlens), int(b.max_seqlen))
            staged.wait_copied()
        except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
            log.exception("staging a bin failed; its documents go alone")
            staged = None
        finally:
            self.packer.release(b.slot)
        phases = _phase_seconds(self.engine)
        outs = self._generate(staged, seqs)
        t1 = time.monotonic()
        gpu_s = t1 - t0
        mark_bin([s.doc for s in seqs if s is not None], t0, t1)
        if phases is not None:  # the engine keeps prefill/decode seconds: each document's share, for traces
            after = _phase_seconds(self.engine)
            mark_phases([s.doc for s in seqs if s is not None], after[0] - phases[0], after[1] - phases[1])
        self.busy_since = None
        self._count(b, len(seqs), gpu_s)
        self.finishing.submit_bin(list(zip(seqs, outs)), gpu_s / max(1, len(seqs)))

    def _count(self, b, n: int, gpu_s: float) -> None:
        m = self.metrics
        m.bin_fill.observe(self.config.fill(int(b.num_tokens), n))
        m.bins.inc()
        m.model_documents.inc(n)
        m.gpu_seconds.inc(gpu_s)
        m.bin_seconds.observe(gpu_s)
        m.input_tokens.inc(int(b.num_tokens))
        self._count_oom_splits()

    def _generate(self, staged, seqs: list[Seq | None]) -> list:
        """The bin's outputs; on a failure each document alone (a failure alone is its own result)."""
        return generate_or_alone(self.engine, staged, [s.tokens if s is not None else None for s in seqs],
                                 self._seeds(seqs), self.metrics.model_errors.inc)

    def _count_oom_splits(self) -> None:
        n = int(getattr(self.engine, "stats", {}).get("oom_splits", 0))
        if n > self._oom_seen:
            self.metrics.oom_splits.inc(n - self._oom_seen)
            self._oom_seen = n

    def _seeds(self, seqs: list[Seq | None]) -> list[int]:
        return [s.doc.seed(self.seed, s.index) if s is not None else 0 for s in seqs]


def _phase_seconds(engine) -> tuple[float, float] | None:
    """The engine's prefill and decode seconds so far (Engine.stats), or None if it does not keep them."""
    stats = getattr(engine, "stats", None) or {}
    if "prefill_s" not in stats or "decode_s" not in stats:
        return None
    return float(stats["prefill_s"]), float(stats["decode_s"])
