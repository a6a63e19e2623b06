"""The GPU stage's runner, one seam: the model in this process | in the engine process (model.process).

A runner reserves a bin's id (`reserve`: the stage registers the bin under it before the write), takes
bins (`put`) and gives back the engine process's messages (`take`: "done" per bin or
"docs" per set of finished documents, worker/pipeline/gpu_batching.py), so the stage handles one
kind of result whichever runs the model.

    LocalRunner    the model in this process, run by the stage's one thread (it alone owns CUDA and
                   the model). `put` stages the bin (H2D) and gives it to the batching policy's local
                   model; `take` runs the model (a whole bin, or one batcher step). Not concurrent:
                   put and take are called from the same thread. It cannot be killed: a stall ends
                   the worker (the app exits 1).
    ProcessRunner  the model in the engine process (worker/remote/process.py). `put` copies the bin into
                   the pipe; `take` reads the next message (waits at most its timeout). Concurrent:
                   the stage sends and receives on two threads, so a slow finishing stage never delays
                   the next bin's sending. `kill` ends the process (a send blocked on its full pipe
                   then fails).

Both: `room(flight)` says how much room the model has (worker/packer/room.py); `oom_splits` counts
what the engine reports as its own running total.
"""

from __future__ import annotations

import importlib
import itertools

from worker.engine.fallback import as_tensor, stage_or_none
from worker.packer.config import PackerConfig
from worker.packer.room import Room


class LocalRunner:
    concurrent = False
    killable = False

    def __init__(self, engine, policy, config: PackerConfig) -> None:
        self.engine = engine
        self.model = policy.local(engine, config)
        self._ids = itertools.count(1)

    @property
    def name(self) -> str:
        return "the model in this process"

    def room(self, flight) -> Room:
        return Room.FREE if self.model.wants_work() else Room.NONE

    def reserve(self) -> int:
        return next(self._ids)

    def put(self, bin_id: int, b, seqs: list, seeds: list[int], t0: float) -> None:
        """Stage the bin (its packer slot may be released after) and give it to the model."""
        staged = stage_or_none(self.engine, as_tensor(b.tokens), as_tensor(b.cu_seqlens), int(b.max_seqlen))
        self.model.add(bin_id, staged, [s.tokens if s is not None else None for s in seqs], list(seeds), t0)

    def take(self, timeout_s: float) -> tuple | None:
        return self.model.take()

    def kill(self) -> bool:
        """A thread cannot be killed: False (the app ends the worker)."""
        return False


class ProcessRunner:
    concurrent = True
    killable = True

    def __init__(self, engine, policy, config: PackerConfig) -> None:
        self.engine, self.policy, self.config = engine, policy, config
        # The results' class, imported here at start: unpickling the first result would import it (and
        # transformers' modeling code, seconds) on the receiver thread, in front of the first documents.
        importlib.import_module("worker.engine.engine")

    @property
    def name(self) -> str:
        return f"the engine process (pid {getattr(getattr(self.engine, 'proc', None), 'pid', None)})"

    def room(self, flight) -> Room:
        return self.policy.room(flight, self.config)

    def reserve(self) -> int:
        """An id unique on the engine process (other stages on it, in the benchmarks, draw from it too)."""
        return self.engine.new_bin_id()

    def put(self, bin_id: int, b, seqs: list, seeds: list[int], t0: float) -> None:
        """The bin into the engine process's pipe (copied: its packer slot may be released after)."""
        self.engine.send_bin(b.tokens, b.cu_seqlens, int(b.max_seqlen), list(seeds), [s is not None for s in seqs],
                             bin_id=bin_id)

    def take(self, timeout_s: float) -> tuple | None:
        """The next result message, or None after `timeout_s`; EngineProcessError once the process is gone."""
        msg = self.engine.receive(timeout_s)
        if msg is None or msg[0] not in ("done", "docs"):
            return None
        stats = self.engine.stats  # the process's OOM splits so far: where the next stage on it counts from
        stats["oom_splits"] = max(int(stats.get("oom_splits", 0)), int(msg[6] if msg[0] == "done" else msg[5]))
        return msg

    def kill(self) -> bool:
        self.engine.kill()
        return True
