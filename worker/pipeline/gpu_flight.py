"""What the GPU stage has handed its runner and not yet had back, by bin: the one in-flight count that
the batching policy's room, the stall watch, readiness and busy time read.

Guarded by the stage's lock (the sender adds, the receiver takes back). A bin is registered only if it
holds a live document (one not revoked); each live document comes back once, in a "done" message of its
bin or a "docs" message of its own. A result for a bin not here (an earlier stage's, on the same engine
process) or for a document already back is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.packer.config import PackerConfig
from worker.pipeline.inflight import Seq


@dataclass
class _Bin:
    seqs: list  # Seq | None by index (None: revoked, or back already)
    left: int  # live documents not yet back
    since: float  # when it was handed to the runner


class Flight:
    def __init__(self, config: PackerConfig) -> None:
        self.config = config
        self._bins: dict[int, _Bin] = {}
        self.docs = 0  # documents in flight
        self.weight = 0  # their weight (prompt + reserve)

    def bins(self) -> int:
        return len(self._bins)

    def add(self, bin_id: int, seqs: list, since: float) -> bool:
        """Register a bin handed to the runner; False if it holds no live document (nothing comes back)."""
        live = [s for s in seqs if s is not None]
        if not live:
            return False
        self._bins[bin_id] = _Bin(list(seqs), len(live), since)
        self.docs += len(live)
        self.weight += sum(self.config.weight(s.prompt_tokens) for s in live)
        return True

    def back(self, bin_id: int, index: int) -> tuple[Seq, float] | None:
        """A document back: (its sequence, when its bin was handed over), or None (not this stage's)."""
        b = self._bins.get(bin_id)
        if b is None or not 0 <= index < len(b.seqs) or b.seqs[index] is None:
            return None
        seq, b.seqs[index] = b.seqs[index], None
        b.left -= 1
        self.docs -= 1
        self.weight -= self.config.weight(seq.prompt_tokens)
        if not b.left:
            del self._bins[bin_id]
        return seq, b.since
