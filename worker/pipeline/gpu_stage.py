"""What the four GPU stages share: their constructor and state, the bin's documents and seeds, and the
counts every bin and every run of the model adds to the metrics.

    GpuStage ─┬─ GpuLoop (worker/pipeline/gpu.py)                model in this process, a bin at a time
              ├─ ContinuousGpuLoop (gpu_continuous.py)            model in this process, continuous batching
              └─ ProcessGpuLoop (gpu_proxy.py)                    model in its own process
                  └─ ContinuousProcessGpuLoop (gpu_proxy_continuous.py)

Each keeps the stage contract (worker/pipeline/stage.py): `run()` goes through `run_stage`; `stop`
asks it to return; `busy_since` is set while the model holds documents (/healthz). The contract each
adds is in its own module.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from worker.packer.config import PackerConfig
from worker.pipeline.inflight import Seq
from worker.pipeline.stage import Shared, run_stage


class BinSink(Protocol):
    """Where finished bins go (worker.pipeline.finishing.Finishing)."""

    def submit_bin(self, pairs, gpu_s_per_doc: float) -> bool: ...


class GpuStage:
    def __init__(self, *, engine, packer, shared: Shared, finishing: BinSink, config: PackerConfig,
                 seed: int = 0) -> None:
        self.engine, self.packer, self.registry, self.finishing = engine, packer, shared.registry, finishing
        self.metrics, self.config, self.seed = shared.metrics, config, seed
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.busy_since: float | None = None

    def run(self) -> None:
        """The thread's body: `_loop` under the stage contract, failures logged on the stage's own logger."""
        run_stage(self, self._loop, logging.getLogger(type(self).__module__), "gpu thread")

    def _loop(self) -> None:
        raise NotImplementedError

    def _take(self, b) -> tuple[list[Seq | None], list[int]]:
        """The bin's sequences, out of the registry (None: dropped by a revoke), and their seeds."""
        seqs = [self.registry.pop(int(sid)) for sid in b.seq_ids]
        return seqs, [s.doc.seed(self.seed, s.index) if s is not None else 0 for s in seqs]

    def _count_bin(self, num_tokens: int, n: int) -> None:
        """A bin taken from the packer: its fill, and its input tokens."""
        m = self.metrics
        m.bin_fill.observe(self.config.fill(num_tokens, n))
        m.bins.inc()
        m.input_tokens.inc(num_tokens)

    def _count_oom_splits(self, total: int, seen: int) -> int:
        """The engine's OOM splits, `total` so far of which `seen` are counted: counts the rest, returns `total`."""
        if total > seen:
            self.metrics.oom_splits.inc(total - seen)
            return total
        return seen
