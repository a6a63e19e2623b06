"""The engine process's side: load the model, warm it up, then run the bins the worker sends.

Started by `worker.remote.process.EngineProcess` (spawn context: a fresh interpreter
that alone initialises CUDA). Its main thread does nothing but run bins through the Engine's
public API (`load_engine`, `autotune_budget`, `warm_up`, `stage`, `generate`; `run_bin`, the body of
a bin at a time, also runs a model in the worker's own process: worker/pipeline/gpu_batching.py); a reader thread
takes the next bin off the pipe (and pins it) while the current one runs, so the GPU never waits
for the worker between bins. See engine_process.py for the protocol.

It ignores SIGINT and SIGTERM: the worker stops it (a "stop" message, or the pipe closing when
the worker exits or dies), after its drain, so a signal to the whole process group cannot kill
the model under a bin the worker is about to commit.

torch (and worker.engine's model code) is imported inside the functions: the worker imports this
module for `child_main` and stays torch-free in digest mode, and the child calls `die_with_parent`
before it spends seconds importing torch.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from pathlib import Path

from worker.engine.errors import EngineSettingError
from worker.engine.fallback import generate_or_alone, stage_or_none
from worker.observability.logs import setup_logging
from worker.observability.stacks import dump_stacks_on_usr1
from worker.remote.child_continuous import serve_continuous
from worker.remote.lifeline import die_with_parent

log = logging.getLogger(__name__)


def child_main(spec, bins, results, parent_pid: int | None = None) -> None:
    """Entry point of the engine process (spec: engine_process.EngineSpec); it dies with `parent_pid`."""
    die_with_parent(parent_pid)  # even while loading the model, when it reads no pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    dump_stacks_on_usr1()
    setup_logging(spec.log_level, spec.log_format)
    try:
        engine, ready = _start(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the worker, which stops with one line
        log.exception("the engine process could not start")
        results.send(("failed", _failure(exc)))
        return
    results.send(("ready", ready))
    inbox: queue.Queue = queue.Queue()
    outbox: queue.Queue = queue.Queue()
    threading.Thread(target=_read, args=(bins, inbox, engine.device.type == "cuda"), name="ribbon-engine-reader",
                     daemon=True).start()
    sender = threading.Thread(target=_send, args=(results, outbox, inbox), name="ribbon-engine-sender", daemon=True)
    sender.start()
    if getattr(engine.options, "batching", "bin") == "continuous":
        serve_continuous(engine, ready["budget"], spec.max_seqs, inbox, outbox)
    else:
        while (item := inbox.get()) is not None:
            outbox.put(_run(engine, item))
    outbox.put(None)
    sender.join()  # every result is in the pipe before the process ends


def _send(results, outbox: queue.Queue, inbox: queue.Queue) -> None:
    """Put results into the pipe, so the main thread goes on to the next bin at once: a bin's result
    (a few hundred kB for 256 documents) outgrows the pipe's buffer, and the worker reads it only
    when its receiver thread gets the worker's interpreter lock. The worker gone ends the process."""
    try:
        while (msg := outbox.get()) is not None:
            results.send(msg)
    except OSError:  # a broken or closed pipe
        log.info("the worker is gone: the engine process ends")
        inbox.put(None)


def _start(spec):
    from worker.engine import autotune_budget, load_engine  # noqa: PLC0415 torch after die_with_parent

    engine = load_engine(spec.model)
    budget = spec.budget
    if budget == "auto":
        budget = autotune_budget(engine, spec.model.max_new_tokens, cache_path=Path(spec.cache_dir) / "autotune.json")
    engine.warm_up(int(budget), spec.max_seqs)
    ready = {"name": engine.name, "backend": engine.backend, "device": str(engine.device), "budget": int(budget),
             "warmup_s": dict(getattr(engine, "warmup_s", {})), "frame": engine.prompt_frame(),
             "max_positions": engine.max_positions,
             "device_name": _device_name(engine.device), "compiled": bool(getattr(engine, "compiled", False))}
    return engine, ready


def _read(bins, inbox: queue.Queue, pin: bool) -> None:
    """Take messages off the pipe while the main thread runs a bin; None in the inbox ends the process."""
    import torch  # noqa: PLC0415 torch after die_with_parent, not in the parent

    try:
        while True:
            msg = bins.recv()
            if msg[0] == "stop":
                break
            if msg[0] == "bin":
                _, bin_id, tokens, cu, max_seqlen, seeds, live = msg
                t = torch.from_numpy(tokens)  # [T] int32
                msg = ("bin", bin_id, t.pin_memory() if pin else t, tokens, cu, max_seqlen, seeds, live)
            inbox.put(msg)
    except (EOFError, OSError):
        log.info("the worker closed the pipe: the engine process ends")
    inbox.put(None)


def _run(engine, item) -> tuple:
    """One bin off the pipe: staged, then `run_bin`."""
    _, bin_id, tokens, host_tokens, cu, max_seqlen, seeds, live = item
    t0 = time.monotonic()
    staged = stage_or_none(engine, tokens, cu, int(max_seqlen))
    pieces = [host_tokens[cu[i]:cu[i + 1]] if live[i] else None for i in range(len(cu) - 1)]
    return run_bin(engine, bin_id, staged, pieces, list(seeds), t0)


def run_bin(engine, bin_id: int, staged, pieces: list, seeds: list[int], t0: float) -> tuple:
    """A bin at a time: one staged bin through the model (a failure: each document alone). Returns
    ("done", bin_id, outputs, t_start, t_end, bin_errors, oom_splits, phases); times are time.monotonic()
    (one clock for every process of the host); phases: the bin's (prefill_s, decode_s), None where the
    engine does not keep them. `pieces[i]`: a document's prompt tokens (None: not live)."""
    errors: list[int] = []
    before = _phases(engine)
    outs = generate_or_alone(engine, staged, pieces, seeds, lambda: errors.append(1))
    t1 = time.monotonic()
    after = _phases(engine)
    phases = (after[0] - before[0], after[1] - before[1]) if before and after else None
    outs = [RuntimeError(f"{type(o).__name__}: {o}") if isinstance(o, BaseException) else o for o in outs]
    return ("done", bin_id, outs, t0, t1, len(errors), int(getattr(engine, "stats", {}).get("oom_splits", 0)),
            phases)


def _phases(engine) -> tuple[float, float] | None:
    """The engine's prefill and decode seconds so far (Engine.stats), or None if it does not keep them."""
    stats = getattr(engine, "stats", None) or {}
    if "prefill_s" not in stats or "decode_s" not in stats:
        return None
    return float(stats["prefill_s"]), float(stats["decode_s"])


def _device_name(device) -> str:
    if device.type != "cuda":
        return "cpu"
    import torch  # noqa: PLC0415 torch after die_with_parent, not in the parent

    return torch.cuda.get_device_name(device)


def _failure(exc: BaseException) -> tuple[str, ...]:
    """How the worker re-raises a start failure: a setting the engine cannot honour (one line, exit
    2), a model that cannot be loaded (OSError/ValueError: one line naming model.path), else an error."""
    if isinstance(exc, EngineSettingError):
        return ("setting", exc.setting, exc.message, exc.allowed)
    return ("load" if isinstance(exc, OSError | ValueError) else "error", f"{type(exc).__name__}: {exc}")
