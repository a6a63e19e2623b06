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
import time

from worker.engine.fallback import as_tensor, generate_or_alone
from worker.pipeline.gpu_stage import GpuStage
from worker.pipeline.inflight import mark_bin, mark_phases

log = logging.getLogger(__name__)


class GpuLoop(GpuStage):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._oom_seen = 0

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.metrics.gpu_heartbeat = time.monotonic()
            b = self.packer.next_bin(0.05)
            if b is not None:
                self.run_bin(b)

    def run_bin(self, b) -> None:
        seqs, seeds = self._take(b)
        t0 = time.monotonic()
        self.busy_since = t0
        staged = stage_bin(self.engine, self.packer, b)
        phases = _phase_seconds(self.engine)
        outs = generate_or_alone(self.engine, staged, [s.tokens if s is not None else None for s in seqs], seeds,
                                 self.metrics.model_errors.inc)  # on a failure each document alone
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
        self._count_bin(int(b.num_tokens), n)
        m.model_documents.inc(n)
        m.gpu_seconds.inc(gpu_s)
        m.bin_seconds.observe(gpu_s)
        self._oom_seen = self._count_oom_splits(int(getattr(self.engine, "stats", {}).get("oom_splits", 0)),
                                                self._oom_seen)


def stage_bin(engine, packer, b):
    """The bin staged on the device (H2D), its packer slot released once copied; None if staging failed
    (its documents then go alone)."""
    try:
        staged = engine.stage(as_tensor(b.tokens), as_tensor(b.cu_seqlens), int(b.max_seqlen))
        staged.wait_copied()
        return staged
    except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
        log.exception("staging a bin failed; its documents go alone")
        return None
    finally:
        packer.release(b.slot)


def _phase_seconds(engine) -> tuple[float, float] | None:
    """The engine's prefill and decode seconds so far (Engine.stats), or None if it does not keep them."""
    stats = getattr(engine, "stats", None) or {}
    if "prefill_s" not in stats or "decode_s" not in stats:
        return None
    return float(stats["prefill_s"]), float(stats["decode_s"])
