"""Rebalance callbacks of the ingest thread: librdkafka calls them inside `poll`, on that thread.

Contract:
- Owns (on the ingest thread, like the consumer it is called with): the assignment's readiness
  (`holds_partitions`, for /readyz), the `assigned` event (set at the first assignment), and what a
  partition's coming and going does: assign starts each partition at its committed offset and sets its
  pause flag to backpressure's; revoke and lost cancel the partitions' epochs in the packer, drop them
  from the registry and the line windows, and remove their lag, unfinished and held gauges.
- May block: an assign asks the group coordinator for the committed offsets (at most 10 s); a revoke waits
  for the preprocessing pool's batches and for delivery's last transaction of those partitions (the commit
  channel, worker/pipeline/commits.py), then commits what delivery finished; a loss waits for the pool only.
- Errors: none of its own; a KafkaException of the consumer propagates out of poll to the ingest thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from worker.kafka.clients import start_positions
from worker.pipeline.commits import Commits
from worker.pipeline.stage import Shared

log = logging.getLogger("worker.pipeline.ingest")  # the ingest thread's log lines


class Host(Protocol):
    """What the callbacks use of the ingest stage (worker/pipeline/ingest.py)."""

    commits: Commits
    paused: bool  # backpressure holds the assignment paused

    def settle(self) -> None: ...  # the preprocessing pool's batches registered (unless the stage failed)

    def commit_delivered(self, asynchronous: bool) -> None: ...


class Rebalance:
    """`on_assign`, `on_revoke`, `on_lost` for `consumer.subscribe` (see the module contract)."""

    def __init__(self, shared: Shared, host: Host, *, packer, lines, reset: str) -> None:
        """`packer` None in digest mode; `lines` the line windows (worker/pipeline/lines.py) or None;
        `reset`: where a partition without a commit starts (worker/kafka/config.offset_reset)."""
        self.tracker, self.registry, self.metrics = shared.tracker, shared.registry, shared.metrics
        self.host, self.packer, self.lines, self.reset = host, packer, lines, reset
        self.assigned = threading.Event()
        self.holds_partitions = False  # ready (/readyz) only with partitions assigned

    def on_assign(self, consumer, partitions) -> None:
        for p in partitions:
            self.tracker.assign((p.topic, p.partition))
        if partitions:
            # librdkafka keeps a partition's pause flag across unassign and assign: a partition lost while
            # paused comes back paused, and a resume after the loss (on the empty assignment) never reaches
            # it. So every assignment sets the flag explicitly, to what backpressure wants now.
            # Each partition starts where the group committed, or where auto.offset.reset says, named
            # here so librdkafka does not wait its fixed 100 ms before looking that up (start_positions).
            partitions = start_positions(consumer, partitions, self.reset)
            consumer.incremental_assign(partitions)
            paused = self.host.paused
            (consumer.pause if paused else consumer.resume)(partitions)
            self.metrics.paused.set(len(consumer.assignment()) if paused else 0)
        self.assigned.set()
        self.holds_partitions = bool(partitions) or bool(consumer.assignment())
        log.info("assigned %s", [(p.topic, p.partition) for p in partitions])

    def on_revoke(self, consumer, partitions) -> None:
        self.host.settle()  # what was polled before the revoke is registered first, as without a pool
        tps = self._forget(consumer, partitions)
        # Whatever is finished for these partitions goes out (and commits) now; the rest is redone elsewhere.
        # The metadata is taken here, inside the callback: the consumer admits this re-entrant call.
        self.host.commits.revoke(tps, group_metadata=consumer.consumer_group_metadata())
        self.host.commit_delivered(asynchronous=False)
        log.info("revoked %s", tps)

    def on_lost(self, consumer, partitions) -> None:
        self.host.settle()
        tps = self._forget(consumer, partitions)
        for tp in tps:
            self.tracker.revoke(tp)
        log.warning("lost %s: their uncommitted results are dropped", tps)

    def _forget(self, consumer, partitions) -> list:
        """The partitions' epochs cancelled and dropped, their gauges removed; readiness updated."""
        tps = [(p.topic, p.partition) for p in partitions]
        epochs = {e for e in (self.tracker.epoch(tp) for tp in tps) if e is not None}
        for e in epochs:
            if self.packer is not None:
                self.packer.cancel(e)
        self.registry.drop_epochs(epochs)
        if self.lines is not None:
            self.lines.drop(tps)
        gone = set(tps)
        if not any((p.topic, p.partition) not in gone for p in consumer.assignment()):
            self.holds_partitions = False
        for topic, part in gone:
            for gauge in (self.metrics.lag, self.metrics.unfinished, self.metrics.held):
                try:
                    gauge.remove(topic, str(part))
                except KeyError:
                    pass
        return tps
