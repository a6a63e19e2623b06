"""The packer's Python facade: a ring of slot buffers around the C++ packer.

Threads: any thread may call ``submit``/``cancel``/``stats``; the GPU thread
calls ``next_bin`` (which blocks with the GIL released) and ``release``. The
C++ packer thread selects and writes bins; see docs/packer.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from worker import _core

from worker.packer.config import PackerConfig
from worker.packer.room import Room, cut
from worker.packer.stats import PackerStats

if TYPE_CHECKING:
    from worker.config.settings import BatchingSettings

_INT32 = np.iinfo(np.int32)
SETTLED_AFTER_WAITS = 10  # input_settled: no document for this many of the window's longest waits (max_wait_s)
_P = TypeVar("_P", bound="Packer")


@dataclass(frozen=True)
class Bin:
    """One packed bin; its arrays are views of slot ``slot`` until ``release``."""

    slot: int
    tokens: Any  # int32 [T_padded]: numpy on cpu, pinned torch tensor on cuda
    cu_seqlens: Any  # int32 [n + 1], same kind as tokens
    seq_ids: np.ndarray  # int64 [n], ribbon order
    max_seqlen: int
    num_tokens: int  # real tokens; tokens[num_tokens:] is alignment padding
    weight: int  # sum(len + reserve_per_seq)
    oldest_wait_s: float  # age of the oldest sequence when released
    reason: str  # why the window released it: efficient | deadline | rate_low | drain


def _round_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _as_int32(seq_id: int, tokens: np.ndarray | Sequence[int]) -> np.ndarray:
    """tokens as a 1-D C-contiguous int32 array, refusing values that do not fit."""
    if isinstance(tokens, np.ndarray) and tokens.dtype == np.int32 and tokens.flags.c_contiguous:
        return tokens
    arr = np.asarray(tokens)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int32)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"tokens of sequence {seq_id} must be integers, got dtype {arr.dtype}")
    if arr.min() < _INT32.min or arr.max() > _INT32.max:
        raise ValueError(f"tokens of sequence {seq_id} do not fit in int32")
    return np.ascontiguousarray(arr, dtype=np.int32)


class Packer:
    """Packs submitted sequences into bins under a token budget (see module doc)."""

    def __init__(self, config: PackerConfig, device: str = "cpu",
                 clock: Callable[[], float] = time.monotonic) -> None:
        """The packer of a (frozen) configuration, with its slot ring on `device` ("cpu" or "cuda");
        `clock` times the arrivals `input_settled` looks at."""
        self.config = c = config
        self.clock = clock
        self._arrived: float | None = None  # clock() at the latest submit
        self._draining = False
        budget, reserve_per_seq, max_seqs, alignment, slots = c.budget, c.reserve_per_seq, c.max_seqs, c.alignment, c.slots
        self.budget = budget
        self.reserve_per_seq = reserve_per_seq
        self.device = device
        ribbon_len = _round_up(budget, alignment)
        # Ring of slot buffers: tokens int32 [ribbon_len], cu_seqlens int32 [max_seqs + 1],
        # seq_ids int64 [max_seqs]. On cuda they are pinned torch tensors (host memory the
        # GPU copies from asynchronously); the C++ side writes them through numpy views.
        self._tokens, self._cu = self._allocate(slots, ribbon_len, max_seqs + 1, device)
        self._ids = [np.zeros(max_seqs, dtype=np.int64) for _ in range(slots)]
        self._core = _core.Packer(
            budget=budget,
            reserve_per_seq=reserve_per_seq,
            max_seqs=max_seqs,
            alignment=alignment,
            efficient_tokens=c.efficient_tokens,
            max_wait_s=c.max_wait_s,
            latency_target_s=c.latency_target_s,
            slot_tokens=[_numpy_view(t) for t in self._tokens],
            slot_cu_seqlens=[_numpy_view(c) for c in self._cu],
            slot_seq_ids=self._ids,
            pad_token=c.pad_token,
            order=c.order,
        )

    @classmethod
    def from_config(cls, config: PackerConfig, device: str = "cpu") -> Packer:
        """The packer of a (frozen) configuration, with its slot ring on `device`."""
        return cls(config, device)

    @staticmethod
    def _allocate(slots: int, ribbon_len: int, cu_len: int, device: str) -> tuple[list[Any], list[Any]]:
        if device == "cpu":
            return (
                [np.zeros(ribbon_len, dtype=np.int32) for _ in range(slots)],
                [np.zeros(cu_len, dtype=np.int32) for _ in range(slots)],
            )
        if device.startswith("cuda") or device == "torch-cpu":
            import torch  # noqa: PLC0415 only torch slots need torch (digest mode, engine-process parents: numpy)

            def make(n: int) -> torch.Tensor:
                t = torch.zeros(n, dtype=torch.int32)  # int32 [n]
                return t.pin_memory() if device.startswith("cuda") else t

            return [make(ribbon_len) for _ in range(slots)], [make(cu_len) for _ in range(slots)]
        raise ValueError(f"device must be 'cpu', 'torch-cpu' or 'cuda[:N]', got {device!r}")

    @classmethod
    def from_settings(
        cls, settings: BatchingSettings, budget: int, reserve_per_seq: int, device: str = "cpu"
    ) -> Packer:
        """Builds a packer from validated settings; budget/reserve are resolved by the caller."""
        return cls.from_config(PackerConfig.from_settings(settings, budget, reserve_per_seq), device)

    def submit(self, seq_id: int, tokens: np.ndarray | Sequence[int], key: int) -> None:
        """Queues one sequence (copied); ValueError if it is empty or len + reserve > budget."""
        self._core.submit(seq_id, _as_int32(seq_id, tokens), key)
        self._arrived = self.clock()

    def submit_many(self, items: Sequence[tuple[int, np.ndarray | Sequence[int], int]]) -> None:
        """Queues (seq_id, tokens, key) items at once: the window sees them arrive together.

        All are checked first: ValueError (naming the sequence) and nothing queued if one is refused."""
        if items:
            self._core.submit_many([int(s) for s, _, _ in items], [_as_int32(s, t) for s, t, _ in items],
                                   [int(k) for _, _, k in items])
            self._arrived = self.clock()

    def next_bin(self, timeout_s: float) -> Bin | None:
        """Waits up to timeout_s (GIL released) for a bin; None on timeout or after close."""
        info = self._core.next_bin(timeout_s)
        if info is None:
            return None
        s, n = info.slot, info.num_seqs
        return Bin(
            slot=s,
            tokens=self._tokens[s][: info.padded_tokens],  # int32 [T_padded], a view
            cu_seqlens=self._cu[s][: n + 1],  # int32 [n + 1], a view
            seq_ids=self._ids[s][:n],  # int64 [n], a view
            max_seqlen=info.max_seqlen,
            num_tokens=info.num_tokens,
            weight=info.weight,
            oldest_wait_s=info.oldest_wait_s,
            reason=info.reason,
        )

    def release(self, slot: int) -> None:
        """Hands slot back to the ring; its views must no longer be used."""
        self._core.release(slot)

    def cancel(self, key: int) -> list[int]:
        """Drops the pending sequences of key; returns their ids in arrival order."""
        return self._core.cancel(key)

    def drain(self, on: bool = True) -> None:
        """While on, bins are released as soon as the consumer is ready (shutdown)."""
        self._core.drain(on)
        self._draining = on

    @property
    def draining(self) -> bool:
        return self._draining

    def input_settled(self) -> bool:
        """Are documents pending that nothing more will join soon: the packer drains, or no document arrived
        for SETTLED_AFTER_WAITS times max_wait_s (a pause a steady stream does not make: its documents
        come within a few of the window's waits of each other; the end of a backlog or of a burst)?
        Continuous batching then queues a partial bin (worker/packer/room.py). False with nothing
        pending: no bin is asked for then, and the window's service estimate (the time from a release
        to the next ask) stays the model's."""
        arrived = self._arrived
        quiet = arrived is not None and self.clock() - arrived >= SETTLED_AFTER_WAITS * self.config.max_wait_s
        if not (self._draining or quiet):
            return False
        return self.stats().pending_seqs > 0

    def close(self) -> None:
        """Wakes every waiter; next_bin returns None and submit raises from now on."""
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def pending_tokens(self, key: int) -> int:
        return self._core.pending_tokens(key)

    def stats(self) -> PackerStats:
        return PackerStats.from_core(self._core.stats())

    def full_bin_pending(self) -> bool:
        """The bin-cut decision the GPU stage asks while a bin runs: with a full bin pending already (a
        backlog) the next bin is cut now and queued behind the running one; otherwise it is cut when
        the model is free, so it takes every document that arrives meanwhile."""
        return self.config.holds_full_bin(self.stats())

    def bin_for(self, room: Room, timeout_s: float) -> Bin | None:
        """The next bin for a model with `room` (worker/packer/room.py: the one rule of when a bin is cut)."""
        return cut(self, room, timeout_s)

    def __enter__(self: _P) -> _P:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _numpy_view(buf: Any) -> np.ndarray:
    """A numpy view (no copy) of a numpy array or a CPU/pinned torch tensor."""
    if isinstance(buf, np.ndarray):
        return buf
    return buf.numpy()  # shares memory with the (pinned) host tensor
