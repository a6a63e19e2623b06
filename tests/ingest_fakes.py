"""Kafka messages, an ingest stage over fakes, and a consumer that records pauses, for the per-stage tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from stage_fakes import Wake

from worker.pipeline.configs import ingest_config
from worker.pipeline.commits import Commits
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.ingest import Downstream, Ingest, Watermarks
from worker.observability.metrics import Metrics
from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker
from worker.config.settings import load_settings


def words(text: str) -> list[int]:
    """A fake tokenizer: a 2-token prompt around one token per word."""
    return [1, *(len(w) for w in text.split()), 2]


def counts(texts) -> list[int]:
    return [len(t.split()) for t in texts]


@dataclass
class Msg:
    _value: bytes | None
    _offset: int
    _topic: str = "in"
    _partition: int = 0
    _ts: float | None = None  # producer's wall-clock time (None: no timestamp)

    def error(self):
        return None

    def timestamp(self) -> tuple[int, int]:
        return (0, -1) if self._ts is None else (1, int(self._ts * 1000))

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes | None:
        return self._value

    def headers(self):
        return None


class LineMsg:
    """A polled record of a line topic: its value, key, offset, Kafka timestamp (ms) and headers."""

    def __init__(self, value, key=None, offset=0, ts=1_700_000_000_000, headers=None):
        self._v, self._k, self._o, self._ts, self._h = value, key, offset, ts, headers

    def value(self):
        return self._v

    def key(self):
        return self._k

    def offset(self):
        return self._o

    def timestamp(self):
        return (1, self._ts)

    def headers(self):
        return self._h


@dataclass
class FakePacker:
    submitted: list = field(default_factory=list)
    pending: int = 0

    def submit_many(self, items) -> None:
        self.submitted.extend((sid, list(tokens), key) for sid, tokens, key in items)

    def stats(self):
        from worker.packer import PackerStats

        return PackerStats(pending_tokens=self.pending)


@dataclass
class PausingConsumer:
    paused: list = field(default_factory=list)
    resumed: list = field(default_factory=list)

    def assignment(self):
        return ["tp0", "tp1"]

    def pause(self, parts) -> None:
        self.paused.append(list(parts))

    def resume(self, parts) -> None:
        self.resumed.append(list(parts))


def make_ingest(packer: FakePacker | None = None):
    tracker, registry, metrics, wake = OffsetTracker(), DocRegistry(), Metrics(), Wake()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: metrics.dead_lettered.labels(c).inc(),
                     wake=wake)
    marks = Watermarks(high_tokens=100, low_tokens=50, high_messages=10, low_messages=5)
    ing = Ingest(config=ingest_config(load_settings(environ={}), marks), shared=Shared(tracker, registry, metrics, dl),
                 make_consumer=PausingConsumer, commits=Commits(tracker),
                 downstream=Downstream(packer or FakePacker(), Planner(words, counts, PlanLimits(50, max_new_tokens=4))))
    ing.consumer = ing.make_consumer()
    tracker.assign(("in", 0))
    return ing, tracker, registry
