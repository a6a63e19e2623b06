"""When a bin is cut, given the room the model has: the packer's one rule, asked by the GPU stage
whatever runs the model (in this process or the engine process) and however it batches.

The model's side says how much room it has (`Room`, from its batching policy:
worker/pipeline/gpu_batching.py); the packer decides whether a bin is cut now:
- `FREE`: the model can take work now: the window policy decides (`next_bin` waits at most its timeout);
- `BACKLOG` (a bin at a time): room only to queue a bin behind the one that runs: a bin is cut only
  when the packer already holds a full one, or drains (waiting would not change it); otherwise the
  next bin is cut when the model is free, so it takes every document that arrives meanwhile (under a
  steady load, one bin time less latency);
- `QUEUE` (continuous batching): room to queue documents that take seats as they free, one by one: a
  bin is cut when the packer holds a full one, or its input has settled (no document for ten times max_wait_s,
  or a drain: waiting would not fill it). Held back instead, the end of a burst would reach the model
  only once its seats had emptied, a round trip after they freed;
- `NONE`: the model holds all it can: no bin.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol


class Room(Enum):
    NONE = 0
    BACKLOG = 1
    QUEUE = 2
    FREE = 3


class _Cuts(Protocol):
    def full_bin_pending(self) -> bool: ...

    def input_settled(self) -> bool: ...

    @property
    def draining(self) -> bool: ...

    def next_bin(self, timeout_s: float) -> Any: ...


def cut(packer: _Cuts, room: Room, timeout_s: float) -> Any:
    """A bin for a model with `room`, or None (see the module docstring)."""
    if room is Room.NONE:
        return None
    if room is Room.BACKLOG and not (packer.full_bin_pending() or packer.draining):
        return None
    if room is Room.QUEUE and not (packer.full_bin_pending() or packer.input_settled()):
        return None
    return packer.next_bin(timeout_s)
