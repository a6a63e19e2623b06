"""The preprocessing pool: each poll batch's model-free work in worker processes (issue 8).

The ingest thread hands a batch of documents here and gets one `Prepared` per document back, in
order (worker/digest/prepared.py: digest, highlights, digest prompt, digest-mode rendering). With
`pipeline.preprocess_processes` = 0 the work runs on the calling thread; with N > 0 the batch is cut
into N contiguous slices of about equal bytes, run in N processes, and joined in order, so the
interpreter lock of the worker's own process (ingest, GPU thread, finishing) is free meanwhile.

Processes start by forkserver (a clean server process forks them): never by fork of this process,
which holds librdkafka's threads. A document whose pass raises comes back with `error` set (ingest
dead-letters it); a pool that breaks (a process killed) raises PreprocessError: ingest fails, and
the worker stops without committing what it had not finished.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from worker.digest.prepared import PrepareOptions, Prepared, prepare_many

MANY_CORES = 8  # auto: a pool only from this many cores


class PreprocessError(RuntimeError):
    """The pool itself failed (not one document): the worker stops."""


def auto_processes(setting: int | None, cores: int | None = None) -> int:
    """pipeline.preprocess_processes: as set, or auto (None): 0 below MANY_CORES cores, else cores // 4 (at most 8)."""
    if setting is not None:
        return setting
    cores = cores or os.cpu_count() or 1
    return 0 if cores < MANY_CORES else min(8, cores // 4)


def _slices(sizes: Sequence[int], n: int) -> list[tuple[int, int]]:
    """[start, end) of up to n contiguous slices of about equal total size."""
    total, per = sum(sizes), max(1, -(-sum(sizes) // n))
    out, start, acc = [], 0, 0
    for i, s in enumerate(sizes):
        acc += s
        if acc >= per * (len(out) + 1) and len(out) < n - 1:
            out.append((start, i + 1))
            start = i + 1
    if start < len(sizes) or not out:
        out.append((start, len(sizes)))
    return out if total else [(0, len(sizes))]


class Preprocessor:
    def __init__(self, processes: int, options: PrepareOptions) -> None:
        if processes < 0:
            raise ValueError(f"preprocess processes must be >= 0, got {processes}")
        self.processes, self.options = processes, options
        self._pool: ProcessPoolExecutor | None = None
        if processes:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["worker.digest.prepared"])
            self._pool = ProcessPoolExecutor(max_workers=processes, mp_context=ctx)
            # start every process now (imports, the templater's tables), not on the first batch
            list(self._pool.map(prepare_many, [[""]] * processes, [[None]] * processes, [[None]] * processes,
                                [options] * processes))

    def run(self, texts: Sequence[str], sources: Sequence[str | None], kinds: Sequence[str | None]) -> list[Prepared]:
        """One Prepared per text, in order."""
        if self._pool is None or not texts:
            return prepare_many(texts, sources, kinds, self.options)
        try:
            futures = [self._pool.submit(prepare_many, texts[a:b], sources[a:b], kinds[a:b], self.options)
                       for a, b in _slices([len(t) for t in texts], self.processes)]
            return [p for f in futures for p in f.result()]
        except BrokenProcessPool as exc:
            raise PreprocessError(f"preprocessing pool broke ({exc}); the worker stops") from exc

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
