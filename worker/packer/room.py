"""When a bin is cut, given the room the model has: the packer's one rule, asked by the GPU stage
whatever runs the model (in this process or the engine process) and however it batches.

The model's side says how much room it has (`Room`, from its batching policy:
worker/pipeline/gpu_batching.py); the packer decides whether a bin is cut now:
- `FREE`: the model can take work now: the window policy decides (`next_bin` waits at most its timeout);
- `BACKLOG`: room only to queue work behind what runs: a bin is cut only when the packer already holds
  a full one (waiting would not change it); otherwise the next bin is cut when the model is free, so
  it takes every document that arrives meanwhile (under a steady load, one bin time less latency);
- `NONE`: the model holds all it can: no bin.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol


class Room(Enum):
    NONE = 0
    BACKLOG = 1
    FREE = 2


class _Cuts(Protocol):
    def full_bin_pending(self) -> bool: ...

    def next_bin(self, timeout_s: float) -> Any: ...


def cut(packer: _Cuts, room: Room, timeout_s: float) -> Any:
    """A bin for a model with `room`, or None (see the module docstring)."""
    if room is Room.NONE or (room is Room.BACKLOG and not packer.full_bin_pending()):
        return None
    return packer.next_bin(timeout_s)
