"""The one channel between ingest (it owns the consumer) and delivery (it owns the producer).

confluent-kafka serializes the calls into one consumer, so delivery never calls it: a call from the
delivery thread would wait for ingest's poll, or for its revoke callback, which may be waiting for
delivery. Everything the two stages trade goes through this object instead, on this contract:

- ingest → delivery, `publish(group_metadata)`: the consumer's group metadata (its generation
  included), every loop; exactly_once transactions send their offsets with the latest one.
- ingest → delivery, `revoke(tps, group_metadata)`: inside the revoke callback, with the metadata
  taken there. It returns once delivery has run one more step with that metadata (what is finished
  for `tps` goes out and commits) and the tracker has forgotten `tps`; at once, forgetting them
  uncommitted, when delivery is closed; after `timeout_s` (logged) when delivery does not answer.
- delivery → ingest, `post(offsets)` (at_least_once): offsets whose outputs the broker acknowledged;
  ingest `take()`s them and commits them with the consumer (a crash in between repeats outputs).
- delivery, `serve(step)` between its steps: runs `step(metadata)` for each revoke waiting (no step
  with `step` None), then forgets its partitions; `close()` when it can serve no more (stopped or
  failed): a revoke waiting then, or later, forgets its partitions uncommitted.

Delivery makes the channel (`Delivery.commits`, with its wake); the app hands it to ingest.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from worker.pipeline.tracker import OffsetTracker

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class _Revoke:
    tps: list[TP]
    group_metadata: object
    done: threading.Event = field(default_factory=threading.Event)


class Commits:
    def __init__(self, tracker: OffsetTracker, wake: Callable[[], None] | None = None,
                 timeout_s: float = 30.0) -> None:
        """`wake`: delivery's, called when a revoke waits for it (None: delivery steps on its own clock)."""
        self.tracker, self.timeout_s, self._wake = tracker, timeout_s, wake
        self._metadata: object = None
        self._revokes: queue.SimpleQueue[_Revoke] = queue.SimpleQueue()
        self._offsets: queue.SimpleQueue[list] = queue.SimpleQueue()
        self._lock = threading.Lock()  # a revoke is queued only while delivery can still serve it
        self._closed = False

    # ---- the consumer's side (the ingest thread) -----------------------------------------
    def publish(self, group_metadata: object) -> None:
        self._metadata = group_metadata

    def revoke(self, tps: list[TP], group_metadata: object) -> None:
        """Commit what is finished for `tps` (one more delivery step), then forget them."""
        with self._lock:
            request = None if self._closed else _Revoke(list(tps), group_metadata)
            if request is not None:
                self._revokes.put(request)
        if request is None:  # no delivery thread to serve it
            self._forget(tps)
            return
        if self._wake is not None:
            self._wake()
        if not request.done.wait(self.timeout_s):
            log.error("revoke of %s not served within %.0f s; dropping them uncommitted", tps, self.timeout_s)
            self._forget(tps)

    def take(self) -> list:
        """The offsets posted since the last call, the latest per partition (TopicPartitions)."""
        latest: dict[TP, object] = {}
        while True:
            try:
                for tp in self._offsets.get_nowait():
                    latest[(tp.topic, tp.partition)] = tp
            except queue.Empty:
                return list(latest.values())

    # ---- the producer's side (the delivery thread) ---------------------------------------
    @property
    def group_metadata(self) -> object:
        """The metadata ingest published last (None before its first loop)."""
        return self._metadata

    def post(self, offsets: list) -> None:
        self._offsets.put(offsets)

    def serve(self, step: Callable[[object], object] | None) -> None:
        """Each revoke waiting: `step(its metadata)` (unless None), then its partitions forgotten."""
        while True:
            try:
                request = self._revokes.get_nowait()
            except queue.Empty:
                return
            try:
                if step is not None:
                    step(request.group_metadata)
            finally:
                self._forget(request.tps)
                request.done.set()

    def close(self) -> None:
        """Delivery serves no more: the revokes waiting, and every later one, forget uncommitted."""
        with self._lock:
            self._closed = True
        self.serve(None)

    def _forget(self, tps: list[TP]) -> None:
        for tp in tps:
            self.tracker.revoke(tp)
