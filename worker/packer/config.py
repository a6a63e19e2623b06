"""The packer's one frozen configuration, and the weight rule.

A document's weight in a bin is its prompt tokens plus the tokens reserved for
its summary (`weight`): budgets, fill, the window policy and the metrics all
count that, and this module is the one place that says so (the C++ core
applies the same rule to `reserve_per_seq`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from worker.config.settings import BatchingSettings
    from worker.packer.stats import PackerStats

Order = Literal["arrival", "decreasing"]


@dataclass(frozen=True)
class PackerConfig:
    budget: int                    # largest weight of a bin
    reserve_per_seq: int           # tokens reserved per document for its summary (generation.max_new_tokens)
    max_seqs: int = 256            # documents per bin at most
    efficient_tokens: int = 8192   # a bin this heavy goes at once
    max_wait_s: float = 0.05       # longest the oldest document waits for a bin to fill
    latency_target_s: float = 2.0  # per-document latency target of the window policy
    alignment: int = 16            # ribbon length padded to a multiple of this
    slots: int = 3                 # bin buffers in the ring
    order: Order = "arrival"       # which documents a bin takes first (docs/pipeline.md)
    pad_token: int = 0

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")
        if self.alignment < 1:
            raise ValueError(f"alignment must be >= 1, got {self.alignment}")

    def weight(self, tokens: int) -> int:
        """A document's weight in a bin: its tokens plus the reserve for its summary."""
        return tokens + self.reserve_per_seq

    def holds_full_bin(self, stats: PackerStats) -> bool:
        """Do the pending documents make a full bin already (its documents or its weight): a backlog?"""
        return stats.pending_seqs >= self.max_seqs or stats.pending_weight >= self.budget

    def fill(self, num_tokens: int, num_seqs: int) -> float:
        """A bin's weight over the budget."""
        return (num_tokens + self.reserve_per_seq * num_seqs) / self.budget

    @classmethod
    def from_settings(cls, s: BatchingSettings, budget: int, reserve_per_seq: int) -> PackerConfig:
        """From validated settings; the budget (autotuned or set) and reserve are resolved by the caller.
        Alignment and slots keep their defaults (no setting names them)."""
        return cls(budget=budget, reserve_per_seq=reserve_per_seq, max_seqs=s.max_seqs_per_bin,
                   efficient_tokens=min(s.efficient_tokens, budget), max_wait_s=s.max_wait_ms / 1e3,
                   latency_target_s=s.latency_target_ms / 1e3, order=s.order)
