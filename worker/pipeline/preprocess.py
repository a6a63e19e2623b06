"""The preprocessing pool: each poll batch's model-free work in worker processes (issue 8).

The ingest thread hands a batch of documents here and gets one `Prepared` per document back, in
order (worker/digest/prepared.py: digest, highlights, digest prompt, digest-mode rendering). With
`pipeline.preprocess_processes` = 0 the work runs on the calling thread; with N > 0 the batch is cut
into N contiguous slices of about equal bytes, run in N processes, and joined in order, so the
interpreter lock of the worker's own process (ingest, GPU thread, finishing) is free meanwhile.
`InOrder` keeps a few batches in the pool while ingest polls the next, and gives them back in order.

Processes start by forkserver (a clean server process forks them): never by fork of this process,
which holds librdkafka's threads. A document whose pass raises comes back with `error` set (ingest
dead-letters it); a pool that breaks (a process killed) raises PreprocessError, and a batch not back
within pipeline.stall_timeout_s raises PreprocessStalled: ingest fails, its pool is killed, and
the worker stops without committing what it had not finished. The forkserver and the pool
processes die with the worker (worker/remote/lifeline.py).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver
from typing import Generic, TypeVar

from worker.digest.prepared import PrepareOptions, Prepared, prepare_many, use_tokenizer
from worker.errors import RibbonError
from worker.remote.lifeline import die_with_parent

T = TypeVar("T")

MANY_CORES = 8  # auto: a pool only from this many cores
CLOSE_S = 10.0  # a pool process not ended this long after close() is killed


class PreprocessError(RibbonError, RuntimeError):
    """The pool itself failed (not one document): the worker stops."""


class PreprocessStalled(PreprocessError):
    """A batch did not come back in time (a pool process stopped or hung): the worker stops."""


def auto_processes(setting: int | None, cores: int | None = None) -> int:
    """pipeline.preprocess_processes: as set, or auto (None): 0 below MANY_CORES cores, else cores // 4 (at most 8)."""
    if setting is not None:
        return setting
    cores = cores or os.cpu_count() or 1
    return 0 if cores < MANY_CORES else min(8, cores // 4)


def start_forkserver() -> multiprocessing.context.BaseContext:
    """The forkserver context, its server started now unless it runs. The forkserver and each pool process
    die with the worker (worker/remote/lifeline.py); on Linux the forkserver's death signal comes when the
    *thread* that started it ends, so call this first on a thread that lasts (Ingest's constructor does,
    on the thread that builds the worker)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["worker.remote.forkserver_lifeline", "worker.digest.prepared",
                                "worker.redaction.rules"])
    forkserver.ensure_running()
    return ctx


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


class Batch:
    """One batch's passes: already done (no pool) or in the pool's processes."""

    def __init__(self, *, done: list[Prepared] | None = None, futures: list[Future] | None = None) -> None:
        self._done, self._futures = done, futures or []
        self.started = time.monotonic()

    def ready(self) -> bool:
        return self._done is not None or all(f.done() for f in self._futures)

    def result(self, timeout_s: float | None = None) -> list[Prepared]:
        """One Prepared per text, in order (waits for the pool: at most `timeout_s` since the batch was
        given, then PreprocessStalled)."""
        if self._done is None:
            deadline = None if timeout_s is None else self.started + timeout_s
            try:
                self._done = [p for f in self._futures
                              for p in f.result(None if deadline is None else max(0.0, deadline - time.monotonic()))]
            except FutureTimeout:
                raise PreprocessStalled(f"the preprocessing pool returned no batch for {timeout_s:.0f} s "
                                        "(pipeline.stall_timeout_s): a pool process is stopped or hung") from None
            except BrokenProcessPool as exc:
                raise PreprocessError(f"preprocessing pool broke ({exc}); the worker stops") from exc
        return self._done

    def waiting_s(self) -> float:
        """Seconds this batch has been in the pool (0 once done)."""
        return 0.0 if self.ready() else time.monotonic() - self.started


class InOrder(Generic[T]):
    """Poll batches in the pool, at most `depth` at once, taken back in the order they were given.

    The ingest thread polls the next batch while the pool works on the last ones; the documents
    reach the registry and the packer in fetch order all the same. `seconds` is the time the caller
    spent here (handing batches over and waiting for them): the digest's share of its critical path.
    """

    def __init__(self, pre: Preprocessor, depth: int, timeout_s: float | None = None) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.pre, self.depth, self.timeout_s = pre, depth, timeout_s
        self._q: deque[tuple[list[T], Batch]] = deque()
        self.seconds = 0.0
        self._reported = 0.0

    def __len__(self) -> int:
        return len(self._q)

    def new_seconds(self) -> float:
        """`seconds` added since the last call (for a counter)."""
        new, self._reported = self.seconds - self._reported, self.seconds
        return new

    def submit(self, items: list[T], texts: Sequence[str], sources: Sequence[str | None],
               kinds: Sequence[str | None], windows: Sequence[bool] | None = None) -> None:
        t0 = time.perf_counter()
        self._q.append((items, self.pre.submit(texts, sources, kinds, windows)))
        self.seconds += time.perf_counter() - t0

    def take(self, block: bool) -> list[tuple[list[T], list[Prepared]]]:
        """The finished batches at the head, in order; with block, every batch (waiting for each). A
        batch beyond `depth` is always waited for (the pool's backpressure on polling)."""
        out = []
        t0 = time.perf_counter()
        while self._q and (block or len(self._q) > self.depth or self._q[0][1].ready()):
            items, batch = self._q[0]
            out.append((items, batch.result(self.timeout_s)))
            self._q.popleft()
        self.seconds += time.perf_counter() - t0
        return out

    def waiting_s(self) -> float:
        """How long the oldest batch has been in the pool (0: none is out)."""
        try:  # read by the health server's thread while ingest pops
            return self._q[0][1].waiting_s()
        except IndexError:
            return 0.0


def _start_process(tokenizer, max_bytes: int | None, options: PrepareOptions, ready) -> None:
    """A pool process's initializer: it dies with the worker, counts the gate's tokens when given the model's
    tokenizer backend, and makes its one-off costs (the redaction rules and their Hyperscan database, the
    header grammar's JIT, the templater's tables: about 0.1 s) on an empty pass before it takes a batch; then
    it reports its pid on `ready`."""
    die_with_parent()
    use_tokenizer(tokenizer, max_bytes)
    prepare_many([""], [None], [None], options)
    ready.put(os.getpid())


class Preprocessor:
    def __init__(self, processes: int, options: PrepareOptions, timeout_s: float | None = None,
                 tokenizer=None, max_text_bytes: int | None = None) -> None:
        """`tokenizer`: the model tokenizer's Rust backend (`backend_tokenizer`), copied into each pool
        process so that the compaction gate's counts are made there for raw texts of at most
        `max_text_bytes` (worker/digest/prepared.py); None: the ingest thread counts.

        Every process starts now and warms up in its initializer, and the constructor returns once each has
        reported: a task per process would not do, since the pool hands tasks to whichever process is free
        (with 2 or 4 processes one of them mostly gets none, and would pay its start on the first batch)."""
        if processes < 0:
            raise ValueError(f"preprocess processes must be >= 0, got {processes}")
        self.processes, self.options = processes, options
        self._pool: ProcessPoolExecutor | None = None
        self.warmed: set[int] = set()  # the pids of the pool processes that reported their warm-up
        if processes:
            ctx = start_forkserver()
            ready = ctx.Queue()
            self._pool = ProcessPoolExecutor(max_workers=processes, mp_context=ctx, initializer=_start_process,
                                             initargs=(tokenizer, max_text_bytes, options, ready))
            try:
                self._start(processes, ready, timeout_s)
            except FutureTimeout:
                self.close(kill=True)
                raise PreprocessStalled(f"the preprocessing pool did not start within {timeout_s:.0f} s "
                                        "(pipeline.stall_timeout_s)") from None

    def _start(self, processes: int, ready, timeout_s: float | None) -> None:
        """Spawn every process (one task each, submitted before any can start) and wait for each one's report."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        left = lambda: None if deadline is None else max(0.0, deadline - time.monotonic())  # noqa: E731
        for f in [self._pool.submit(os.getpid) for _ in range(processes)]:
            f.result(left())
        for _ in list(self._pool._processes):  # no public count of a pool's processes
            try:
                self.warmed.add(ready.get(timeout=left()))
            except queue.Empty:
                raise FutureTimeout from None

    def submit(self, texts: Sequence[str], sources: Sequence[str | None], kinds: Sequence[str | None],
               windows: Sequence[bool] | None = None) -> Batch:
        """Start one batch (without a pool: run it now); its results come from Batch.result(). `windows`:
        which texts are windows (worker/digest/prepared.py prepare_many: the gate's counts)."""
        if self._pool is None or not texts:
            return Batch(done=prepare_many(texts, sources, kinds, self.options, windows))
        try:
            return Batch(futures=[self._pool.submit(prepare_many, texts[a:b], sources[a:b], kinds[a:b], self.options,
                                                    windows[a:b] if windows else None)
                                  for a, b in _slices([len(t) for t in texts], self.processes)])
        except BrokenProcessPool as exc:
            raise PreprocessError(f"preprocessing pool broke ({exc}); the worker stops") from exc

    def run(self, texts: Sequence[str], sources: Sequence[str | None], kinds: Sequence[str | None]) -> list[Prepared]:
        """One Prepared per text, in order."""
        return self.submit(texts, sources, kinds).result()

    def close(self, kill: bool = False) -> None:
        """Shut the pool down; with `kill` (after a failure or stall), its processes are killed first, so
        a stopped or hung one cannot hold the worker's exit."""
        if self._pool is None:
            return
        procs = list(getattr(self._pool, "_processes", {}).values())  # no public kill before Python 3.14
        if kill:
            for proc in procs:
                proc.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + (5.0 if kill else CLOSE_S)
        for proc in procs:  # a process stopped after its last batch must not hold the exit either
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5.0)
        self._pool = None


def cold_pieces(n: int, first: int) -> list[int]:
    """Sizes of doubling pieces of a batch of `n`: first, 2*first, 4*first, ..., a piece taken only while
    what stays after it fills the next (twice as large); the last piece takes the rest. Sums to n."""
    out, size, left = [], max(1, first), n
    while left - size >= 2 * size:
        out.append(size)
        left -= size
        size *= 2
    return [*out, left] if left else out
