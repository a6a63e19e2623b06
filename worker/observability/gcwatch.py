"""Garbage-collector pauses in the worker's process: timed, and kept short.

CPython's cyclic collector runs while holding the interpreter lock, so every
thread of the worker (ingest, the GPU stage, finishing, delivery) waits through
a collection; a full one walks every tracked object, including all that
start-up built and never frees: the modules, the tokenizer and, with the model
in this process, its loader's objects (how many: the start-up log line).

- `GcWatch.start()` times each collection (`gc.callbacks`) into
  `ribbon_gc_pause_seconds{generation}` and keeps the longest; `stop()` removes
  the callback.
- `settle()`, called once the parts are built and before the first poll:
  one full collection, then `gc.freeze()` moves everything alive to the
  permanent generation, which later collections skip (the pattern CPython
  documents for long-lived servers, and the reason gc.freeze exists).
  The worker always does (measured: docs/pipeline.md). `unsettle()` at close gives them back to
  the collector (a process that runs workers one after another, as the tests
  and benchmarks do, does not keep each one's garbage for good).
"""

from __future__ import annotations

import gc
import time


class GcWatch:
    def __init__(self, histogram) -> None:
        # ribbon_gc_pause_seconds by generation, its children made now: the callback only observes
        # (it runs wherever a collection starts, so it takes no lock but the child's own)
        self._by_generation = {g: histogram.labels(str(g)) for g in range(3)}
        self.longest_s = 0.0
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        pause = time.perf_counter() - self._t0
        self.longest_s = max(self.longest_s, pause)
        child = self._by_generation.get(info.get("generation"))
        if child is not None:
            child.observe(pause)

    def start(self) -> GcWatch:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)


def settle() -> int:
    """One full collection, then freeze what survived; returns the objects now frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def unsettle() -> None:
    """Give frozen objects back to the collector (a worker closed; its process may go on)."""
    gc.unfreeze()
