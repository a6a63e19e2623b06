"""A bin that fails (not an OOM: the engine splits those itself) is retried one document at a time.

Shared by the GPU stage's runner in this process (worker/pipeline/gpu_runners.py) and the engine
process (worker/remote/child.py, child_continuous.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

log = logging.getLogger(__name__)


def as_tensor(x):
    """Packer slots are numpy arrays on CPU, pinned torch tensors on CUDA; the engine takes tensors."""
    if isinstance(x, np.ndarray):
        import torch  # noqa: PLC0415 the pipeline imports this module: torch only with an engine in-process

        return torch.from_numpy(x)  # zero-copy view
    return x


def stage_or_none(engine, tokens, cu, max_seqlen: int):
    """The bin staged on the device (H2D, copied), or None if staging failed (its documents then go alone)."""
    try:
        staged = engine.stage(tokens, cu, int(max_seqlen))
        staged.wait_copied()
        return staged
    except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
        log.exception("staging a bin failed; its documents go alone")
        return None


def generate_or_alone(engine, staged, pieces: list, seeds: list[int], on_bin_error: Callable[[], None]) -> list:
    """One bin's outputs, in order; shared by the GPU thread and the engine process.

    `staged` is the bin as staged (None if staging failed); `pieces[i]` the i-th document's prompt
    tokens (None: it was revoked, its result is None). When the bin fails (not an OOM: the engine
    splits those itself) `on_bin_error` is called and each document runs alone; a document that
    fails alone gets its exception as its result (finishing dead-letters it)."""
    if staged is not None:
        try:
            return engine.generate(staged, seeds)
        except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
            on_bin_error()
            log.exception("model failed on a bin of %d documents; retrying each alone", len(pieces))
    return [None if p is None else run_alone(engine, p, seed) for p, seed in zip(pieces, seeds)]


def run_alone(engine, tokens, seed: int):
    """One document as a bin of its own: its output, or the exception it failed with."""
    cu = np.array([0, len(tokens)], dtype=np.int32)  # [2] int32
    try:
        staged = engine.stage(as_tensor(np.asarray(tokens, dtype=np.int32)), as_tensor(cu), len(tokens))
        return engine.generate(staged, [seed])[0]
    except Exception as exc:  # noqa: BLE001 - this document goes to the dead-letter topic (finishing)
        log.warning("a document of %d tokens failed alone: %s", len(tokens), exc)
        return exc
