"""The model in its own process: the worker's handle on it.

Why: a small model is bound by kernel launches, i.e. by the Python of the thread that runs it,
and in one process that thread shares the interpreter lock with ingest (validation, digests,
tokenization), finishing (building outputs) and delivery: after every device call it waits for
the lock. In its own process (`model.process`; auto: on with CUDA, off on CPU) the model's thread
has an interpreter to itself, and the worker's stages keep theirs.

Contract:
- The engine process is started with the spawn context (a fresh interpreter: CUDA is initialised
  there only, never in the worker). It loads the model, settles the token budget (autotune, cached
  in `model.cache_dir`), warms up (KV pool, compiled layers, decode graphs) and reports ready with
  the budget and the prompt frame; `EngineProcess(...)` returns only then (or raises: a setting
  the engine cannot honour as EngineSettingError, a model that cannot be loaded as ValueError,
  anything else as EngineProcessError). The worker loads only the tokenizer, to plan prompts.
- Protocol, two one-way pipes of pickled tuples (arrays are numpy: a bin is one copy each way):
    worker → engine  ("bin", bin_id, tokens int32 [T], cu_seqlens int32 [n+1], max_seqlen, seeds [n], live [n])
                     ("stop",)                         run what is queued, then exit
    engine → worker  ("ready", info) | ("failed", kind, ...)   once, at start
                     ("done", bin_id, outputs, t_start, t_end, bin_errors, oom_splits, phases)   per bin, in order
                         (phases: the bin's (prefill_s, decode_s), for the documents' traces; None: not kept)
                     ("docs", [(bin_id, index, output)], t_start, t_end, bin_errors, oom_splits, busy_s)
                         model.batching = continuous: documents as they finish (worker/remote/child_continuous.py)
  `outputs[i]` is the engine's Generated, None for a document not `live` (revoked), or a
  RuntimeError for a document that failed alone (dead-lettered by finishing). A bin that fails is
  retried one document at a time there, as in this process (worker.engine.fallback.generate_or_alone).
  Times are time.monotonic(), one clock for the processes of a host.
- May block: the constructor (the model's start, up to `start_timeout_s`, seeing `stop`), `send_bin`
  (only if the engine stops reading), `receive` (its timeout, or while the process is stopped in the
  middle of writing a message). The last two end when the process is killed: the GPU stage's stall
  watch kills it at pipeline.stall_timeout_s, and `close` at its timeout.
- Errors: the process dying, or its pipe closing, raises EngineProcessError from `receive` or
  `send_bin`: the GPU stage stops with it, and the worker stops without committing more (exit 1),
  as when the GPU thread fails; nothing unfinished is committed, a restart redoes it.
- Shutdown: `close(timeout_s)` sends "stop" and waits, then kills the process if it has not ended; it
  returns within its timeout (and the kill's join) even when the process reads nothing and a bin's
  write is blocked on its full pipe. The
  process ignores SIGINT/SIGTERM (the worker drains first, then stops it) and ends by itself when
  the worker's end of the pipe closes (the worker exited), or at once by SIGKILL when the worker
  dies (worker/remote/lifeline.py). A bin with no result for pipeline.stall_timeout_s gets the
  process killed by the GPU stage (`kill`).
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import select
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from worker.engine.errors import EngineSettingError
from worker.errors import RibbonError
from worker.remote.child import child_main

log = logging.getLogger(__name__)


class EngineProcessError(RibbonError, RuntimeError):
    """The engine process failed to start, died, or closed its pipe."""


class EngineStopped(EngineProcessError):
    """The stop signal came while the engine process was starting."""


@dataclass(frozen=True)
class EngineSpec:
    """What the engine process needs to start (picklable)."""

    model: Any  # ModelSettings, its path resolved
    budget: int | str  # packer.token_budget ("auto": autotuned there)
    max_seqs: int  # packer.max_seqs_per_bin (warm-up)
    cache_dir: str
    log_level: str = "INFO"
    log_format: str = "json"


def want_process(model) -> bool:
    """model.process: on, off, or auto (on when the model will run on CUDA). The check goes through
    NVML, so it does not initialise CUDA in this process."""
    if model.process != "auto":
        return model.process == "on"
    if model.device != "auto":
        return model.device.startswith("cuda")
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch  # noqa: PLC0415 after PYTORCH_NVML_BASED_CUDA_CHECK is set; digest mode: none

    return torch.cuda.is_available()


class EngineProcess:
    """The worker's handle on the engine process (see the module contract). It stands in for the
    Engine where the worker plans prompts (`tokenizer`, `prompt_ids_batch`) and names the model."""

    def __init__(self, spec: EngineSpec, *, start_timeout_s: float = 3_600.0,
                 stop: threading.Event | None = None) -> None:
        ctx = mp.get_context("spawn")
        bins_r, self._bins = ctx.Pipe(duplex=False)
        self._results, results_w = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=child_main, args=(spec, bins_r, results_w, os.getpid()),
                                name="ribbon-engine", daemon=True)
        self.proc.start()
        bins_r.close()  # the child holds these ends: its death closes our pipes
        results_w.close()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.stats = {"oom_splits": 0}
        try:
            self.tokenizer = _tokenizer(spec.model)  # while the model loads there
            self._ready(self._wait_ready(start_timeout_s, stop))
        except BaseException:
            self.close(timeout_s=1)  # a process still loading does not read "stop": killed
            raise
        self.max_new_tokens = spec.model.max_new_tokens

    def _wait_ready(self, timeout_s: float, stop: threading.Event | None) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if stop is not None and stop.is_set():
                raise EngineStopped("stopped while the engine process was starting")
            msg = self.receive(0.2)
            if msg is None:
                continue
            if msg[0] == "ready":
                return msg[1]
            raise _start_error(msg[1])
        raise EngineProcessError(f"the engine process was not ready after {timeout_s:.0f} s")

    def _ready(self, info: dict) -> None:
        import torch  # noqa: PLC0415 pipeline.app imports this module: digest mode loads no torch

        self.name, self.backend, self.budget = info["name"], info["backend"], info["budget"]
        self.device = torch.device(info["device"])  # a name only: CUDA is not initialised here
        self.device_name, self.warmup_s, self.compiled = info["device_name"], info["warmup_s"], info["compiled"]
        self._head, self._tail = list(info["frame"][0]), list(info["frame"][1])
        self.max_positions = info.get("max_positions")
        log.info("engine process ready", extra={"pid": self.proc.pid, "model": self.name, "backend": self.backend,
                                                "device": info["device"], "budget": self.budget})

    # ---- prompts (the worker's side of planning) ------------------------------------------
    def prompt_ids(self, document: str) -> list[int]:
        return self.prompt_ids_batch([document])[0]

    def prompt_ids_batch(self, documents: list[str]) -> list[list[int]]:
        """As Engine.prompt_ids_batch: the engine's frame (Engine.prompt_frame, sent at start) around each
        document tokenized as text, special-token parsing off."""
        docs = self.tokenizer(list(documents), add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return [self._head + d + self._tail for d in docs]

    # ---- bins ------------------------------------------------------------------------------
    def new_bin_id(self) -> int:
        """The next bin's id (thread-safe: itertools.count), reserved before its write (the GPU stage)."""
        return next(self._ids)

    def send_bin(self, tokens, cu_seqlens, max_seqlen: int, seeds: list[int], live: list[bool],
                 bin_id: int | None = None) -> int:
        """Queue one bin there (copies the arrays: the packer's slot may be released after) under `bin_id`
        (None: the next one); its id."""
        bin_id = self.new_bin_id() if bin_id is None else bin_id
        self._send(("bin", bin_id, np.array(tokens, dtype=np.int32), np.array(cu_seqlens, dtype=np.int32),
                    int(max_seqlen), list(seeds), list(live)))
        return bin_id

    def receive(self, timeout_s: float) -> tuple | None:
        """The next message, or None after `timeout_s`; EngineProcessError if the process is gone."""
        try:
            if self._results.poll(timeout_s):
                return self._results.recv()
        except (EOFError, OSError):
            pass
        else:
            if self.proc.is_alive():
                return None
        self.proc.join(1.0)
        raise EngineProcessError(f"the engine process ended (exit code {self.proc.exitcode})")

    def _send(self, msg: tuple) -> None:
        try:
            with self._send_lock:
                self._bins.send(msg)
        except (OSError, ValueError) as exc:
            raise EngineProcessError(f"the engine process is gone (exit code {self.proc.exitcode}): {exc}") from None

    def kill(self) -> None:
        """End the process at once (it stopped making progress); close() still tidies up after."""
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the process (it runs what is queued first); kill it if it has not ended in time. Bounded
        by `timeout_s` (and the kill's join) whatever the process does: "stop" goes only if it can go in
        time (`_send_stop`)."""
        deadline = time.monotonic() + timeout_s
        if self.proc.is_alive():
            self._send_stop(timeout_s)
            self.proc.join(max(0.0, deadline - time.monotonic()))
        if self.proc.is_alive():
            log.warning("the engine process did not stop in %.0f s: killing it", timeout_s)
            self.proc.kill()
            self.proc.join(5)
        held = self._send_lock.acquire(timeout=5.0)  # a write under way fails at once now (broken pipe)
        try:
            self._bins.close()
        finally:
            if held:
                self._send_lock.release()
        self._results.close()

    def _send_stop(self, timeout_s: float) -> None:
        """"stop" into the pipe, if within `timeout_s` no bin's write holds the send lock and the pipe has
        room: an engine process that reads nothing (stopped, hung) leaves a write blocked for good, and
        a sender thread blocked in one holds the lock. Else nothing is sent (close() kills it)."""
        deadline = time.monotonic() + timeout_s
        if not self._send_lock.acquire(timeout=max(0.0, timeout_s)):
            return
        try:  # writable: a page of the pipe free, more than the few bytes of "stop" (no partial write)
            if select.select([], [self._bins], [], max(0.0, deadline - time.monotonic()))[1]:
                self._bins.send(("stop",))
        except (OSError, ValueError):
            pass  # the process is gone
        finally:
            self._send_lock.release()


def _tokenizer(model):
    from transformers import AutoTokenizer  # noqa: PLC0415 pipeline.app imports this module: digest mode loads none

    return AutoTokenizer.from_pretrained(model.path, local_files_only=bool(model.local_files_only))


def _start_error(failure: tuple) -> Exception:
    kind, *rest = failure
    if kind == "setting":
        return EngineSettingError(*rest)
    if kind == "load":
        return ValueError(rest[0])
    return EngineProcessError(f"the engine process could not start: {rest[0]}")
