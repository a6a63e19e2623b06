"""A log line while the worker waits for its consumer group to assign partitions.

A group join can take tens of seconds (the broker waits for the other members, or for a departed
one's session to time out); without a word the worker looks hung. `JoinWatch.tick()` is called by
the app's main loop: the first wait is announced at once, then every `every_s` seconds while no
partition is assigned; a later wait (all partitions revoked) is announced once it lasts `every_s`.
The ingest thread logs the assignment itself. Pure policy with an injected clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

log = logging.getLogger("worker.pipeline.app")


class JoinWatch:
    def __init__(self, group: str, topics: Sequence[str], ready: Callable[[], bool], every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.group, self.topics, self.ready, self.every_s, self.clock = group, tuple(topics), ready, every_s, clock
        self._since: float | None = None  # when the current wait began
        self._next: float | None = None  # when it is next announced
        self._first = True

    def tick(self) -> None:
        now = self.clock()
        if self.ready():
            self._since = self._next = None
            self._first = False
            return
        if self._since is None:
            self._since = now
            self._next = now if self._first else now + self.every_s
        if now < self._next:
            return
        waited = now - self._since
        topics = ", ".join(self.topics)
        if waited < 1:
            log.info("joining consumer group %s for %s: waiting for partitions", self.group, topics,
                     extra={"group": self.group, "topics": list(self.topics)})
        else:
            log.info("still waiting for consumer group %s to assign partitions of %s (%.0f s)", self.group, topics,
                     waited, extra={"group": self.group, "topics": list(self.topics), "waited_s": round(waited, 1)})
        self._next = now + self.every_s
