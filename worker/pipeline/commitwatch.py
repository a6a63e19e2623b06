"""Progress watched, not assumed: an assigned partition with lag and no commit for too long.

Whatever holds a partition (a record that is refused for ever, an offset fetch that never returns, a
document that never leaves the model, a group that never resumes after a broker freeze), its mark is
the same: the partition is assigned, input waits for it, and its committed offset does not move.

- `observe(states)`: the ingest thread's report, every 5 s, of each assigned
  partition (`State`: the committed offset, the high watermark, what is fetched but unfinished).
  A partition is *behind* when something fetched is unfinished, when its committed offset is not
  known (the offset fetch has not returned), or when the high watermark is more than one offset
  past it (one offset is a transaction's commit marker at the end of the log, never consumed).
  Its committed offset moving, or the partition not being behind, is progress.
- `health()`: (ok, why); not ok once a partition has been behind without progress for `stall_s`
  (pipeline.stall_timeout_s): /readyz answers 503 with `why`.
- `failure()`: at twice `stall_s`, one line naming the partition, how long, and the last warning or
  error the worker logged (`note`, fed by `LastProblem`, a logging handler); the app stops (exit 1).
- `stalled_for()`: seconds without progress per watched partition (0 when not behind); `export`
  writes them to `ribbon_partition_stalled_seconds`.

Time while nothing observes (the ingest thread itself stuck) still counts: the watch reads its
injected clock when asked. Pure policy; thread-safe (one lock).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from worker.errors import RibbonError
from worker.observability.health import HEALTHY, Health

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class State:
    committed: int | None  # the next offset after what is committed (None: not known yet)
    high: int | None       # the high watermark (None: not known yet)
    unfinished: int = 0    # offsets fetched and not yet committed

    def behind(self) -> bool:
        if self.unfinished > 0 or self.committed is None:
            return True
        return self.high is not None and self.high - self.committed > 1


@dataclass
class _Watched:
    state: State
    since: float  # clock() of its last progress (or its first observation)


class CommitWatch:
    def __init__(self, stall_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if stall_s <= 0:
            raise ValueError(f"stall_s must be > 0, got {stall_s}")
        self.stall_s, self.clock = stall_s, clock
        self._lock = threading.Lock()
        self._parts: dict[TopicPartition, _Watched] = {}
        self._problem: str | None = None  # the last warning or error logged
        self._exported: set[TopicPartition] = set()  # partitions with a series in the gauge

    def observe(self, states: Mapping[TopicPartition, State]) -> None:
        """The assignment's partitions now (others are forgotten: revoked)."""
        now = self.clock()
        with self._lock:
            parts = {}
            for tp, st in states.items():
                old = self._parts.get(tp)
                moved = old is None or not st.behind() or (
                    st.committed is not None and (old.state.committed is None or st.committed > old.state.committed))
                parts[tp] = _Watched(st, now if moved else old.since)
            self._parts = parts

    def note(self, problem: str) -> None:
        with self._lock:
            self._problem = problem

    def stalled_for(self) -> dict[TopicPartition, float]:
        now = self.clock()
        with self._lock:
            return {tp: (now - w.since if w.state.behind() else 0.0) for tp, w in self._parts.items()}

    def export(self, gauge) -> None:
        """Set `ribbon_partition_stalled_seconds` (a labelled Gauge: topic, partition) from `stalled_for`;
        partitions no longer watched lose their series. Called by one thread (the app's main loop)."""
        now = self.stalled_for()
        for t, p in self._exported - set(now):
            gauge.remove(t, str(p))
        for (t, p), seconds in now.items():
            gauge.labels(t, str(p)).set(round(seconds, 1))
        self._exported = set(now)

    def _worst(self) -> tuple[TopicPartition, float, State] | None:
        now = self.clock()
        with self._lock:
            worst = max(((tp, now - w.since, w.state) for tp, w in self._parts.items() if w.state.behind()),
                        key=lambda x: x[1], default=None)
        return worst

    def status(self) -> tuple[bool, str]:
        """(progressing, why): False from pipeline.stall_timeout_s without a commit while input waits."""
        worst = self._worst()
        if worst is None or worst[1] < self.stall_s:
            return True, "progressing"
        return False, self._line(*worst)

    def health(self) -> Health:
        """A health source of the app's (worker/observability/health.py): not ready while a partition stalls."""
        ok, why = self.status()
        return HEALTHY if ok else Health(ready=False, why=why)

    def failure(self) -> str | None:
        worst = self._worst()
        if worst is None or worst[1] < 2 * self.stall_s:
            return None
        return self._line(*worst)

    def _line(self, tp: TopicPartition, seconds: float, st: State) -> str:
        committed = "unknown (the offset fetch has not returned)" if st.committed is None else str(st.committed)
        high = "unknown" if st.high is None else str(st.high)
        with self._lock:
            problem = self._problem or "none logged"
        return (f"partition {tp[0]}/{tp[1]} has committed nothing for {seconds:.0f} s with input waiting "
                f"(committed offset {committed}, high watermark {high}, {st.unfinished} fetched unfinished; "
                f"pipeline.stall_timeout_s {self.stall_s:.0f}); last problem: {problem}")


class PartitionStalled(RibbonError, RuntimeError):
    """A partition committed nothing for twice pipeline.stall_timeout_s with input waiting: exit 1."""


class LastProblem(logging.Handler):
    """Feeds the watch the last WARNING or ERROR line of the worker's loggers."""

    def __init__(self, watch: CommitWatch) -> None:
        super().__init__(level=logging.WARNING)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.watch.note(f"{record.levelname} {record.name}: {record.getMessage()}"[:500])
        except Exception:  # noqa: BLE001 - a log line that cannot be formatted is no reason to fail
            self.handleError(record)
