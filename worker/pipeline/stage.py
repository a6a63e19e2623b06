"""The contract every stage of the pipeline keeps, written once (docs/architecture.md).

A stage is one thread that alone owns its resources (the consumer, the engine, the producer, ...).
- `run()` is the thread's body: it returns when the stage is stopped or has failed. It never
  raises: a failure is recorded on `error` (the first one wins) and logged once, and the app,
  which polls every stage's `error` (`Worker.failed`), stops the worker without committing more.
- Stopping is asked from outside (each stage's `stop` event, or `Finishing.stop()`); the app then
  joins the thread, in the order docs/architecture.md gives.
- Between stages only the seams named there: the tracker, the registry, the packer, the finishing
  queue, the wake of delivery.

`run_stage` is the one catch-record-stop block every `run()` goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol


class Stage(Protocol):
    """What the app needs of a stage's thread: its body, and the error it ended with (None: it did not fail)."""

    error: BaseException | None

    def run(self) -> None: ...


def run_stage(stage: Stage, body: Callable[[], None], log: logging.Logger, what: str,
              cleanup: Callable[[], None] | None = None, traceback: bool = True) -> None:
    """Run `body`; an exception is recorded on `stage.error` (the first one wins) and logged as
    "`what` failed" on the stage's own logger; `cleanup` runs however `body` ends."""
    try:
        body()
    except BaseException as exc:  # noqa: BLE001 - recorded for the app, which stops the worker
        if stage.error is None:
            stage.error = exc
            if traceback:
                log.exception("%s failed", what)
            else:
                log.error("%s failed: %s", what, exc)
    finally:
        if cleanup is not None:
            cleanup()
