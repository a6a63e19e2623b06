"""The GPU stage's batching policy, one seam: a bin at a time | continuous (batching.mode).

A policy says two things, whichever runner runs the model (worker/pipeline/gpu_runners.py):
- `room(flight, config)`: how much room the model has for another bin, from what is in flight
  (worker/packer/room.py: the packer then decides whether a bin is cut). This is the rule of the
  engine process, whose model runs apart from the stage; in this process the model's own state says
  it (`LocalModel.wants_work`).
- `local(engine, config)`: how a model in this process runs the bins it is given. Both run the engine
  process's own loop bodies (worker/remote/child.py `run_bin`, worker/remote/child_continuous.py
  `admit`/`step`), so both runners hand the stage the same messages:
      ("done", bin_id, outputs, t_start, t_end, bin_errors, oom_splits)          a bin at a time
      ("docs", [(bin_id, index, output)], t_start, t_end, bin_errors, oom_splits, busy_s)   continuous

    BinAtATime   room: free with nothing in flight; one bin queued behind a running one in a backlog
    Continuous   room: free while the documents in flight are fewer than the seats (packer.max_seqs) and
                 their weight below the token budget; a queue up to twice that (documents wait there,
                 so freed seats are refilled without a round trip: a full bin, or the end of a burst)
"""

from __future__ import annotations

import queue
from collections import deque
from typing import Protocol

from worker.packer.config import PackerConfig
from worker.packer.room import Room
from worker.remote.child import run_bin
from worker.remote.child_continuous import admit, step


class Flight(Protocol):
    """What the stage has in flight (worker/pipeline/gpu_flight.py)."""

    docs: int
    weight: int

    def bins(self) -> int: ...


class LocalModel(Protocol):
    """A model in this process, driven by the stage's one thread."""

    def wants_work(self) -> bool: ...

    def add(self, bin_id: int, staged, pieces: list, seeds: list[int], t0: float) -> None: ...

    def take(self) -> tuple | None: ...


class BinAtATime:
    name = "bin"
    AHEAD = 1  # bins queued in the engine process behind the running one (a backlog only)

    def room(self, flight: Flight, config: PackerConfig) -> Room:
        n = flight.bins()
        return Room.FREE if not n else Room.BACKLOG if n <= self.AHEAD else Room.NONE

    def local(self, engine, config: PackerConfig) -> LocalModel:
        return WholeBins(engine)


class Continuous:
    name = "continuous"

    def room(self, flight: Flight, config: PackerConfig) -> Room:
        seats, budget = config.max_seqs, config.budget
        if flight.docs < seats and flight.weight < budget:
            return Room.FREE
        return Room.QUEUE if flight.docs < 2 * seats and flight.weight < 2 * budget else Room.NONE

    def local(self, engine, config: PackerConfig) -> LocalModel:
        return Steps(engine, config)


def batching_policy(name: str) -> BinAtATime | Continuous:
    """batching.mode's policy."""
    return Continuous() if name == "continuous" else BinAtATime()


class WholeBins:
    """A bin at a time: a bin given (`add`) runs whole when taken (`take`)."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self._given: deque = deque()

    def wants_work(self) -> bool:
        return not self._given

    def add(self, bin_id: int, staged, pieces: list, seeds: list[int], t0: float) -> None:
        self._given.append((bin_id, staged, pieces, seeds, t0))

    def take(self) -> tuple | None:
        return run_bin(self.engine, *self._given.popleft()) if self._given else None


class Steps:
    """Continuous batching: bins join the engine's batcher; each `take` runs one step (documents finished
    in it come back at once) while the batcher holds documents."""

    def __init__(self, engine, config: PackerConfig) -> None:
        self.engine, self.batcher = engine, engine.batcher(config.max_seqs, config.budget)
        self._pieces: dict = {}  # (bin_id, index) -> prompt tokens, for a retry alone
        self._out: queue.Queue = queue.Queue()
        self._busy = [0.0]  # step seconds not yet reported

    def wants_work(self) -> bool:
        return not self.batcher.busy or self.batcher.wants_work()

    def add(self, bin_id: int, staged, pieces: list, seeds: list[int], t0: float) -> None:
        admit(self.engine, self.batcher, staged, bin_id, pieces, seeds, (self._pieces, self._out, t0))

    def take(self) -> tuple | None:
        if self._out.empty() and self.batcher.busy:
            step(self.engine, self.batcher, self._pieces, self._out, self._busy)
        try:
            return self._out.get_nowait()
        except queue.Empty:
            return None
