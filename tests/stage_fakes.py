"""Fakes of a stage's neighbours for the per-stage unit tests (no broker, no model)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from worker.packer.config import PackerConfig
from worker.pipeline.inflight import Doc, DocRegistry
from worker.pipeline.tracker import OffsetTracker


@dataclass
class Generated:
    text: str
    token_ids: list[int]


def make_doc(tracker: OffsetTracker, tp=("in", 0), offset: int = 0, text: str = "line a\nERROR line b",
             key: bytes | None = b"k") -> Doc:
    epoch = tracker.epoch(tp) or tracker.assign(tp)
    assert tracker.see(tp, epoch, offset)
    return Doc(tp, epoch, offset, key, f"{tp[0]}:{tp[1]}:{offset}", text, {"source": "gnb-1"}, 0.0,
               raw=text.encode(), headers=(("traceparent", b"00-abc"),))


@dataclass
class Wake:
    """A delivery stand-in: counts wake-ups."""

    n: int = 0

    def __call__(self) -> None:
        self.n += 1


@dataclass
class Bin:
    """What Packer.next_bin returns, with plain numpy arrays."""

    slot: int
    tokens: np.ndarray
    cu_seqlens: np.ndarray
    seq_ids: np.ndarray
    max_seqlen: int
    num_tokens: int


def bin_of(slot: int, seq_ids: list[int], prompts: list[list[int]]) -> Bin:
    lens = [len(p) for p in prompts]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)  # [n + 1] int32
    toks = np.concatenate([np.asarray(p, dtype=np.int32) for p in prompts])  # [T] int32
    return Bin(slot, toks, cu, np.asarray(seq_ids, dtype=np.int64), max(lens), int(cu[-1]))


@dataclass
class FakePacker:
    bins: list[Bin] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    reserve: int = 4  # tokens of weight per document beyond its prompt (PackerConfig.reserve_per_seq)
    stats_calls: int = 0  # how often a stage looked at the pending work
    config: PackerConfig = field(default_factory=lambda: PackerConfig(budget=100, reserve_per_seq=4))
    closed: bool = False
    settled: bool = False  # input_settled(): nothing more arrives for the pending documents (quiet, or a drain)
    draining: bool = False

    def next_bin(self, timeout_s: float):
        return self.bins.pop(0) if self.bins else None

    def stats(self):
        """What the bins not yet taken hold, as the packer counts it."""
        from worker.packer.stats import PackerStats

        self.stats_calls += 1
        seqs = sum(len(b.seq_ids) for b in self.bins)
        tokens = sum(int(b.num_tokens) for b in self.bins)
        return PackerStats(pending_seqs=seqs, pending_tokens=tokens, pending_weight=tokens + self.reserve * seqs)

    def full_bin_pending(self) -> bool:
        return self.config.holds_full_bin(self.stats())  # the packer's own rule, on what the fake holds

    def input_settled(self) -> bool:
        return self.settled

    def bin_for(self, room, timeout_s: float):
        from worker.packer.room import cut

        return cut(self, room, timeout_s)  # the packer's own rule

    def release(self, slot: int) -> None:
        self.released.append(slot)

    def close(self) -> None:
        self.closed = True


class FakeSink:
    """Finishing stand-in for the GPU loop: records what it is handed."""

    def __init__(self) -> None:
        self.bins: list[tuple[list, float]] = []
        self.got = threading.Event()

    def submit_bin(self, pairs, gpu_s_per_doc: float) -> bool:
        self.bins.append((list(pairs), gpu_s_per_doc))
        self.got.set()
        return True


def registered(registry: DocRegistry, doc: Doc, prompts: list[list[int]]) -> list[int]:
    out = registry.add(doc, [tuple(p) for p in prompts], final=len(prompts) == 1)
    for _, seq, p in out:
        seq.tokens = np.asarray(p, dtype=np.int32)  # [n] int32
    return [sid for sid, _, _ in out]


def gpu_stage(engine, packer, shared, finishing, batching: str = "bin", where: str = "local", seed: int = 0,
              stall_s: float | None = None):
    """The GPU stage over a fake model: the runner `where` runs it (local | process), batching as given."""
    from worker.pipeline.gpu_batching import batching_policy
    from worker.pipeline.gpu_runners import LocalRunner, ProcessRunner
    from worker.pipeline.gpu_stage import GpuConfig, GpuStage

    config = packer.config
    runner = (LocalRunner if where == "local" else ProcessRunner)(engine, batching_policy(batching), config)
    return GpuStage(runner=runner, packer=packer, shared=shared, finishing=finishing,
                    config=GpuConfig(config, seed=seed, stall_s=stall_s, drain_s=1.0))
