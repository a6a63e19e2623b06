"""Fakes of a model, in this process or in the engine process, a bin at a time or continuous, for the GPU
stage's contract suite: one gate (a semaphore) lets each unit of the model's work run (a bin, or a
step that finishes one document), so a test holds the model still or lets it go. A document's output is
its prompt length as text; a document of 3 tokens fails (alone too: its result is its exception)."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass

from stage_fakes import Generated

from worker.remote.process import EngineProcessError

FAILS = 3  # prompt length of a document that fails


def _out(n: int):
    return RuntimeError("failed alone") if n == FAILS else Generated(f"len {n}", [1] * n)


class Staged:
    def __init__(self, cu) -> None:
        self.lens = [int(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)]

    def wait_copied(self) -> None:
        pass


@dataclass
class StepResult:
    done: list


class FakeBatcher:
    """A continuous batcher: each step (one gate pass) finishes the oldest document it holds."""

    def __init__(self, engine, seats: int) -> None:
        self.engine, self.seats, self.entries = engine, seats, []

    def add(self, staged, seeds, tags, limits=None) -> None:
        self.entries += [(tag, seed, n) for tag, seed, n in zip(tags, seeds, staged.lens) if tag is not None]

    @property
    def busy(self) -> bool:
        return bool(self.entries)

    def wants_work(self) -> bool:
        return len(self.entries) < self.seats

    def step(self) -> StepResult:
        self.engine.pass_gate()
        if self.entries[0][2] == FAILS:
            raise RuntimeError("step failed")  # abort() then gives back every document it holds
        tag, _, n = self.entries.pop(0)
        return StepResult([(tag, _out(n), 0.01)])

    def abort(self) -> list:
        out, self.entries = [(tag, seed, 0) for tag, seed, _ in self.entries], []
        return out


class FakeEngine:
    """The model in this process (worker.engine.Engine's API as the GPU stage's LocalRunner uses it)."""

    name, device = "fake", "cpu"

    def __init__(self, gated: bool = False) -> None:
        self.gate = threading.Semaphore(0 if gated else 10**6)
        self.stats = {"oom_splits": 0}
        self.killed = False

    def pass_gate(self) -> None:
        self.gate.acquire()

    def stage(self, tokens, cu, max_seqlen):
        return Staged(cu)

    def generate(self, staged: Staged, seeds):
        self.pass_gate()
        if FAILS in staged.lens and len(staged.lens) > 1:
            raise RuntimeError("bin failed")
        if staged.lens == [FAILS]:
            raise RuntimeError("failed alone")
        return [_out(n) for n in staged.lens]

    def limits(self, seeds):
        return None

    def batcher(self, seats: int, kv_rows: int) -> FakeBatcher:
        return FakeBatcher(self, seats)


class FakeEngineProcess:
    """The engine process (EngineProcess's seam): bins in; ("done", ...) per bin or ("docs", ...) per
    document out, each through one gate pass. `kill` ends it: `receive` then raises."""

    def __init__(self, batching: str, gated: bool = False) -> None:
        self.batching = batching
        self.gate = threading.Semaphore(0 if gated else 10**6)
        self.stats = {"oom_splits": 0}
        self.killed = False
        self.sent: list[tuple] = []
        self._ids = itertools.count(1)
        self._bins: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def new_bin_id(self) -> int:
        return next(self._ids)

    def send_bin(self, tokens, cu, max_seqlen, seeds, live, bin_id: int | None = None) -> int:
        if self.killed:
            raise EngineProcessError("the engine process is gone")
        bin_id = self.new_bin_id() if bin_id is None else bin_id
        self.sent.append((bin_id, list(seeds), list(live)))
        self._bins.put((bin_id, Staged(cu).lens, list(live)))
        return bin_id

    def _run(self) -> None:
        while True:
            bin_id, lens, live = self._bins.get()
            if self.batching == "bin":
                self.gate.acquire()
                now = time.monotonic()
                outs = [_out(n) if ok else None for n, ok in zip(lens, live)]
                self.results.put(("done", bin_id, outs, now - 0.5, now, int(FAILS in lens), 2))
                continue
            for i, (n, ok) in enumerate(zip(lens, live)):
                if ok:
                    self.gate.acquire()
                    now = time.monotonic()
                    self.results.put(("docs", [(bin_id, i, _out(n))], now - 0.5, now, 0, 2, 0.5))

    def receive(self, timeout_s: float):
        if self.killed:
            raise EngineProcessError("the engine process ended (exit code -9)")
        try:
            return self.results.get(timeout=min(timeout_s, 0.05)) if timeout_s > 0 else self.results.get_nowait()
        except queue.Empty:
            return None

    def kill(self) -> None:
        self.killed = True
