"""The contract every stage of the pipeline keeps, written once (docs/architecture.md).

A stage is a thread (or a few) that alone owns its resources (the consumer, the engine, the producer, ...).
- `start()` starts its thread(s); `run()` is the thread's body: it returns when the stage is stopped
  or has failed. It never raises: a failure is recorded on `error` (the first one wins) and logged
  once, and the app, which polls every stage's `error` (`Worker.failed`), stops the worker without
  committing more.
- `stop()` asks it to return (it never blocks); `join(timeout_s)` waits for its threads at most that
  long and says whether they ended. The app stops and joins its stages in the order
  docs/architecture.md gives.
- `health()` says whether the stage is live (/healthz) and ready (/readyz), and why not: each stage
  judges its own progress; the app combines every health source it holds (`combine`).
- Between stages only the seams named there: the tracker, the registry, the packer, the finishing
  queue, the wake of delivery, and the commit channel between ingest and delivery
  (worker/pipeline/commits.py).

`run_stage` is the one catch-record-stop block every stage thread's body goes through.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from worker.observability.health import HEALTHY, Health, HealthSource, combine

__all__ = ["HEALTHY", "Health", "HealthSource", "Shared", "Stage", "StageThread", "combine", "record_failure",
           "run_stage"]

if TYPE_CHECKING:
    from worker.observability.metrics import Metrics
    from worker.pipeline.commitwatch import CommitWatch
    from worker.pipeline.deadletter import DeadLetters
    from worker.pipeline.inflight import DocRegistry
    from worker.pipeline.tracker import OffsetTracker


class Stage(HealthSource, Protocol):
    """What the app needs of a stage: start, its body, stop, join, health, and the error it ended with
    (None: it did not fail)."""

    error: BaseException | None

    def start(self) -> None: ...

    def run(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout_s: float) -> bool: ...


class StageThread:
    """`start` and `join` for a stage that runs `run` on one daemon thread named `thread_name`."""

    thread_name = "ribbon-stage"
    _thread: threading.Thread | None = None

    def run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> bool:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.alive()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


@dataclass(frozen=True)
class Shared:
    """What the stages of one worker share: the offsets (tracker), the in-flight documents (registry),
    the metrics, and the one dead-letter path (None where a stage makes no dead letters)."""

    tracker: OffsetTracker
    registry: DocRegistry
    metrics: Metrics
    dead_letters: DeadLetters | None = None
    watch: CommitWatch | None = None  # each partition's progress, told by ingest's lag reports


def run_stage(stage: Stage, body: Callable[[], None], log: logging.Logger, what: str,
              cleanup: Callable[[], None] | None = None, traceback: bool = True) -> None:
    """Run `body`; an exception is recorded on `stage.error` (`record_failure`); `cleanup` runs however
    `body` ends."""
    try:
        body()
    except BaseException as exc:  # noqa: BLE001 - recorded for the app, which stops the worker
        record_failure(stage, exc, log, what, traceback)
    finally:
        if cleanup is not None:
            cleanup()


def record_failure(stage: Stage, exc: BaseException, log: logging.Logger, what: str, traceback: bool = True) -> None:
    """`exc` on `stage.error` unless a failure is there already (the first one wins), logged once as
    "`what` failed" on the stage's own logger. For a failure a stage finds without an exception
    raised (a stall it watches for), and for `run_stage`."""
    if stage.error is None:
        stage.error = exc
        if traceback:
            log.error("%s failed", what, exc_info=exc)
        else:
            log.error("%s failed: %s", what, exc)


class EngineLike(Protocol):
    """What the app and ingest's planner use of the engine, in this process (worker.engine.Engine) or
    in its own (worker.remote.process.EngineProcess): the GPU stage's runner that drives each is chosen
    by the app (worker/pipeline/gpu_runners.py: LocalRunner over `stage`/`generate`/`batcher`,
    ProcessRunner over `send_bin`/`receive`)."""

    name: str
    tokenizer: object
    stats: dict

    def prompt_ids(self, document: str) -> list[int]: ...

    def prompt_ids_batch(self, documents: list[str]) -> list[list[int]]: ...
