"""The contract every stage of the pipeline keeps, written once (docs/architecture.md).

A stage is one thread that alone owns its resources (the consumer, the engine, the producer, ...).
- `run()` is the thread's body: it returns when the stage is stopped or has failed. It never
  raises: a failure is recorded on `error` (the first one wins) and logged once, and the app,
  which polls every stage's `error` (`Worker.failed`), stops the worker without committing more.
- Stopping is asked from outside (each stage's `stop` event, or `Finishing.stop()`); the app then
  joins the thread, in the order docs/architecture.md gives.
- Between stages only the seams named there: the tracker, the registry, the packer, the finishing
  queue, the wake of delivery, and the commit channel between ingest and delivery
  (worker/pipeline/commits.py).

`run_stage` is the one catch-record-stop block every stage thread's body goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from worker.observability.metrics import Metrics
    from worker.pipeline.commitwatch import CommitWatch
    from worker.pipeline.deadletter import DeadLetters
    from worker.pipeline.inflight import DocRegistry
    from worker.pipeline.tracker import OffsetTracker


class Stage(Protocol):
    """What the app needs of a stage's thread: its body, and the error it ended with (None: it did not fail)."""

    error: BaseException | None

    def run(self) -> None: ...


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
    in its own (worker.remote.process.EngineProcess): the GPU stage that drives each is chosen by the
    app (GpuLoop over `stage`/`generate`, ProcessGpuLoop over `send_bin`/`receive`)."""

    name: str
    tokenizer: object
    stats: dict

    def prompt_ids(self, document: str) -> list[int]: ...

    def prompt_ids_batch(self, documents: list[str]) -> list[list[int]]: ...
