"""The engine process's main loop with continuous batching (worker/remote/child.py starts it). Its
bodies, `admit` and `step`, also run a model in the worker's own process (the GPU stage's continuous
policy, worker/pipeline/gpu_batching.py), so both hand back the same messages.

    bins from the reader thread (while the batcher wants work) → batcher.add → batcher.step
    → ("docs", [(bin_id, index, output)], t_start, t_end, bin_errors, oom_splits, busy_s) per step
      with finished documents, so each document's result leaves as soon as it is decoded (busy_s:
      seconds in steps since the previous "docs" message)

Protocol additions to worker/remote/process.py's: a bin's documents come back in "docs" messages, each
document once, in the order they finish (a document not `live` never comes back). A step that fails
drops the batch; each of its documents runs alone and a lone failure comes back as a RuntimeError
(dead-lettered there).
"""

from __future__ import annotations

import logging
import queue
import time

from worker.engine.fallback import run_alone, stage_or_none

log = logging.getLogger(__name__)


def serve_continuous(engine, budget: int, max_seqs: int, inbox: queue.Queue, outbox: queue.Queue) -> None:
    batcher = engine.batcher(max_seqs, budget)
    pieces: dict[tuple[int, int], object] = {}  # (bin_id, index) -> host prompt tokens, for a retry alone
    busy = [0.0]  # step seconds not yet reported
    stopping = False
    while True:
        while not stopping and (not batcher.busy or batcher.wants_work()):
            try:
                item = inbox.get() if not batcher.busy else inbox.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stopping = True
            else:
                _add(engine, batcher, item, pieces, outbox)
        if batcher.busy:
            step(engine, batcher, pieces, outbox, busy)
        elif stopping:
            return


def _add(engine, batcher, item, pieces: dict, outbox: queue.Queue) -> None:
    _, bin_id, tokens, host_tokens, cu, max_seqlen, seeds, live = item
    t0 = time.monotonic()
    staged = stage_or_none(engine, tokens, cu, int(max_seqlen))
    admit(engine, batcher, staged, bin_id, [host_tokens[cu[i]:cu[i + 1]] if live[i] else None
                                            for i in range(len(cu) - 1)], list(seeds), (pieces, outbox, t0))


def admit(engine, batcher, staged, bin_id: int, host: list, seeds: list[int], into: tuple) -> None:
    """A staged bin's documents into the batcher, tagged (bin_id, index); `host[i]`: a document's prompt
    tokens (None: not live, never comes back). `into`: (pieces, outbox, t0): the prompts kept for a
    retry alone, where results go, when the bin arrived. A bin that failed to stage (None) goes alone."""
    pieces, outbox, t0 = into
    tags = [(bin_id, i) if p is not None else None for i, p in enumerate(host)]
    for tag, p in zip(tags, host):
        if tag is not None:
            pieces[tag] = p
    if staged is None:
        _alone(engine, [(t, seeds[t[1]]) for t in tags if t is not None], pieces, outbox, t0)
        return
    batcher.add(staged, seeds, tags, engine.limits(seeds))


def step(engine, batcher, pieces: dict, outbox: queue.Queue, busy: list[float]) -> None:
    """One batcher step; finished documents out as one "docs" message (none when none finished)."""
    t0 = time.monotonic()
    try:
        r = batcher.step()
    except Exception:  # noqa: BLE001 - routed: each document of the batch goes alone
        log.exception("a continuous-batching step failed; its documents go alone")
        _alone(engine, [(tag, seed) for tag, seed, _ in batcher.abort()], pieces, outbox, t0, errors=1)
        return
    t1 = time.monotonic()
    busy[0] += t1 - t0
    if r.done:
        for tag, *_ in r.done:
            pieces.pop(tag, None)
        outs = [(tag[0], tag[1], gen) for tag, gen, _ in r.done]
        outbox.put(("docs", outs, t0, t1, 0, _ooms(engine), busy[0]))
        busy[0] = 0.0


def _alone(engine, docs: list, pieces: dict, outbox: queue.Queue, t0: float, errors: int = 0) -> None:
    outs = []
    for tag, seed in docs:
        out = run_alone(engine, pieces.pop(tag), seed)
        outs.append((tag[0], tag[1], RuntimeError(f"{type(out).__name__}: {out}") if isinstance(out, BaseException)
                     else out))
    t1 = time.monotonic()
    outbox.put(("docs", outs, t0, t1, errors, _ooms(engine), t1 - t0))


def _ooms(engine) -> int:
    return int(getattr(engine, "stats", {}).get("oom_splits", 0))
