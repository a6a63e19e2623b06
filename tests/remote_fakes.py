"""A stand-in for the engine process of the GPU proxy stages."""

from __future__ import annotations

import queue
import threading

from stage_fakes import Generated

from worker.remote.process import EngineProcessError


class FakeRemote:
    """EngineProcess's seam: bins in, ("done", ...) out; answers only when `gate` lets a bin through."""

    def __init__(self, gated: bool = False) -> None:
        self.sent: list[tuple] = []
        self.results: queue.Queue = queue.Queue()
        self.gate = threading.Semaphore(0 if gated else 10**6)
        self.dead = False
        self.stats = {"oom_splits": 0}
        self._ids = iter(range(1, 10**6))
        self._bins: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def new_bin_id(self) -> int:
        return next(self._ids)

    def send_bin(self, tokens, cu, max_seqlen, seeds, live, bin_id: int | None = None) -> int:
        bin_id = self.new_bin_id() if bin_id is None else bin_id
        self.sent.append((bin_id, list(seeds), list(live)))
        self._bins.put((bin_id, [int(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)], live))
        return bin_id

    def _run(self) -> None:
        while True:
            bin_id, lens, live = self._bins.get()
            self.gate.acquire()
            outs = [RuntimeError("failed alone") if n == 3 else (Generated(f"len {n}", [1] * n) if ok else None)
                    for n, ok in zip(lens, live)]
            self.results.put(("done", bin_id, outs, 10.0, 10.5, int(3 in lens), 2))

    def receive(self, timeout_s: float):
        if self.dead:
            raise EngineProcessError("the engine process ended (exit code -9)")
        try:
            return self.results.get(timeout=timeout_s)
        except queue.Empty:
            return None
