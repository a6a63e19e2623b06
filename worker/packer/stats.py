"""The packer's counters, typed (the C++ core's PackerStats, as Python sees it)."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class PackerStats:
    pending_seqs: int = 0
    pending_tokens: int = 0
    pending_weight: int = 0
    submitted_seqs: int = 0
    submitted_tokens: int = 0
    bins_emitted: int = 0
    seqs_emitted: int = 0
    tokens_emitted: int = 0
    weight_emitted: int = 0
    cancelled_seqs: int = 0
    fill_ratio: float = 0.0                  # mean bin weight over the budget
    waits: int = 0                           # bins the window held back at least once
    wait_s_total: float = 0.0
    slot_waits: int = 0                      # times every slot was busy
    free_slots: int = 0
    arrival_rate_tokens_per_s: float = 0.0   # weight per second, estimated
    service_estimate_s: float = 0.0
    released_efficient: int = 0
    released_no_gain: int = 0
    released_deadline: int = 0
    released_rate_low: int = 0
    released_drain: int = 0

    @classmethod
    def from_core(cls, d: dict[str, int | float]) -> PackerStats:
        """From the binding's dict; a key it lacks stays at its default."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})  # type: ignore[arg-type]
