"""`ribbon replay rerun`: the worker over a past range of the input, in its own group, then stop.

1. The range: for every partition of the input topics, the start is the first
   offset at or after `--since` (or `--from-offset`, capped at the end), the
   end is the partition's end offset now. Records produced later are not part
   of the range (a few may still be processed before the stop).
2. The start offsets are committed for `--rerun-group`, which must not be the
   live `kafka.group_id`: the live group's offsets are never touched. The
   re-run's transactional ids contain its group, so it fences no live worker.
3. `ribbon run` in that group until every partition is done (checked every
   second, with a progress bar), then a normal drain and stop. A partition is
   done when its committed offset reaches its end, or when no record is left
   between the two: on a topic written in transactions the last offsets are
   commit markers (and aborted records), which no consumer is given and whose
   offsets a commit does not pass until a later record comes.
4. `--timeout` bounds the whole re-run, model load included: past it the worker
   drains and stops, and the command exits 1 saying how far it got.
5. Dead letters go to a topic of the re-run's own: `--dlq-topic`, by default
   `<kafka.dlq_topic>.rerun` (made when missing, as many partitions as the live
   one), never the live dead-letter topic that `replay dlq` reads.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from confluent_kafka import TopicPartition
from tqdm import tqdm

from worker.cli.preflight import check_model_path, ensure_topic, probe_cluster, refuse_random_model
from worker.cli.replay import end_offsets, parse_time, start_offsets
from worker.cli.start import build_worker
from worker.config.errors import EXIT_FAILED, StartupError
from worker.config.model import hub_offline
from worker.kafka import clients
from worker.kafka.config import kafka_client_config
from worker.observability.logs import setup_logging
from worker.pipeline.app import install_signal_handlers

log = logging.getLogger(__name__)

Range = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (start, end)


def plan_range(consumer: Any, topics: tuple[str, ...], since_ms: int | None, from_offset: int | None,
               timeout_s: float) -> Range:
    out: Range = {}
    md = consumer.list_topics(timeout=timeout_s)
    for topic in topics:
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise StartupError("kafka.input_topics", f"input topic {topic!r} does not exist", exit_code=EXIT_FAILED)
        parts = sorted(t.partitions)
        ends = end_offsets(consumer, topic, parts, timeout_s)
        if from_offset is not None:
            starts = {p: min(max(from_offset, 0), ends[p]) for p in parts}
        else:
            starts = start_offsets(consumer, topic, parts, since_ms, timeout_s)
        out.update({(topic, p): (starts[p], ends[p]) for p in parts})
    return out


def committed(consumer: Any, rng: Range, timeout_s: float) -> dict[tuple[str, int], int]:
    tps = consumer.committed([TopicPartition(t, p) for t, p in rng], timeout=timeout_s)
    return {(tp.topic, tp.partition): tp.offset for tp in tps}


def nothing_left(consumer: Any, pending: dict[tuple[str, int], tuple[int, int]], wait_s: float = 1.0) -> set:
    """The partitions of `pending` ((topic, partition) -> (committed, end)) with no record to be consumed
    between the two: the consumer's position reached the end without being given one (within `wait_s`)."""
    if not pending:
        return set()
    consumer.assign([TopicPartition(t, p, c) for (t, p), (c, _) in pending.items()])
    open_, done = set(pending), set()
    deadline = time.monotonic() + wait_s
    try:
        while open_ and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                tp = (msg.topic(), msg.partition())
                if msg.error() is None and tp in open_ and msg.offset() < pending[tp][1]:
                    open_.discard(tp)  # a record left to process: not done
            positions = consumer.position([TopicPartition(t, p) for t, p in open_])
            for pos in positions:
                tp = (pos.topic, pos.partition)
                if pos.offset >= pending[tp][1]:
                    open_.discard(tp)
                    done.add(tp)
    finally:
        consumer.unassign()
    return done


class Progress:
    """Which partitions of the range are done, from the re-run group's commits (the watcher's consumer)."""

    def __init__(self, consumer: Any, rng: Range) -> None:
        self.consumer, self.rng = consumer, rng
        self.done: set[tuple[str, int]] = {tp for tp, (s, e) in rng.items() if s >= e}
        self.records = 0  # records of the range behind the committed offsets

    def update(self) -> bool:
        offs = committed(self.consumer, self.rng, 10.0)
        self.records = sum(min(max(offs[tp], s), e) - s for tp, (s, e) in self.rng.items())
        self.done |= {tp for tp, (_, e) in self.rng.items() if offs[tp] >= e}
        pending = {tp: (max(offs[tp], s), e) for tp, (s, e) in self.rng.items()
                   if tp not in self.done and offs[tp] >= 0}
        self.done |= nothing_left(self.consumer, pending)
        return len(self.done) == len(self.rng)


def rerun_dlq_topic(live_dlq: str) -> str:
    """The re-run's dead-letter topic when --dlq-topic is not given: the live one's name + `.rerun`."""
    return f"{live_dlq}.rerun"


def rerun(settings: Any, args: Any) -> int:
    deadline = time.monotonic() + args.timeout
    k = settings.kafka
    group = args.rerun_group
    if group == k.group_id:
        raise StartupError("kafka.group_id", f"--rerun-group {group!r} is the live group; a re-run needs its own")
    since = parse_time(args.since) if args.since else None
    if settings.model.mode != "digest":
        refuse_random_model(settings.model.path)
        check_model_path(settings.model.path, hub_offline(), fetch_known=True)
    setup_logging(settings.log_level, settings.log_format)
    dlq = getattr(args, "set_kafka__dlq_topic", None) or rerun_dlq_topic(k.dlq_topic)
    settings = settings.model_copy(update={"kafka": k.model_copy(update={"group_id": group, "dlq_topic": dlq})})
    consumer_conf, producer_conf = kafka_client_config(settings.kafka)
    info = probe_cluster(producer_conf, 10.0)
    if ensure_topic(producer_conf, info, "kafka.dlq_topic", dlq, info.topics.get(k.dlq_topic, 1)):
        log.info("created the re-run's dead-letter topic %s", dlq)
    log.info("the re-run's dead letters go to %s", dlq)
    admin = clients.consumer(consumer_conf)
    timed_out = threading.Event()
    try:
        rng = plan_range(admin, settings.kafka.input_topics, since, args.from_offset, 30.0)
        admin.commit(offsets=[TopicPartition(t, p, s) for (t, p), (s, _) in rng.items()], asynchronous=False)
        total = sum(e - s for s, e in rng.values())
        log.info("re-run of %d records over %d partitions in group %s", total, len(rng), group)
        stop = install_signal_handlers()
        progress = Progress(admin, rng)
        done = threading.Event()

        def watch() -> None:  # owns `admin` from here on
            with tqdm(total=total, desc=f"rerun {group}", unit="msg", disable=not sys.stderr.isatty()) as bar:
                while not stop.wait(1.0):
                    if time.monotonic() > deadline:
                        timed_out.set()
                        stop.set()
                        return
                    finished = progress.update()
                    bar.n = progress.records
                    bar.refresh()
                    if finished:
                        done.set()
                        stop.set()

        watcher = threading.Thread(target=watch, name="ribbon-rerun-watch", daemon=True)
        watcher.start()  # before the model loads: --timeout bounds that too
        worker = build_worker(settings, k.bootstrap_servers, stop)
        code = 0 if worker is None else worker.run_until_signalled(stop)
        watcher.join(15.0)
    finally:
        admin.close()
    if timed_out.is_set():
        print(f"ribbon: error: re-run stopped at --timeout {args.timeout:g} s: {progress.records} of {total} "
              f"offsets committed in group {group} ({len(progress.done)} of {len(rng)} partitions done)",
              file=sys.stderr)
        return EXIT_FAILED
    if code == 0 and not done.is_set():
        log.warning("re-run stopped by a signal before the end of its range")
        return EXIT_FAILED
    if code == 0:
        print(f"re-ran {total} offsets in group {group} (records, and any transaction markers among them)")
    return code
