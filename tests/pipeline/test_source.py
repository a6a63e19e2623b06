"""The poll's decoding (worker/pipeline/source.py): each record becomes a Doc, a dead letter, or nothing."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from confluent_kafka import KafkaError
from hypothesis import given, settings
from hypothesis import strategies as st
from ingest_fakes import Msg
from stage_fakes import Wake

from worker.pipeline.configs import ingest_config
from worker.config.settings import load_settings
from worker.kafka.headers import parse_dead_letter_headers
from worker.observability.metrics import Metrics
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.guard import Guard
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.source import CONSUME_ERROR_TRIES, Source, _line_runs
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker


@dataclass
class Failed(Msg):
    """A consume error in the poll's batch (the record carries no data)."""

    code: str = "_TRANSPORT"

    def error(self):
        return KafkaError(getattr(KafkaError, self.code))


def make_source() -> tuple[Source, OffsetTracker, Metrics]:
    tracker, metrics = OffsetTracker(), Metrics()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: metrics.dead_lettered.labels(c).inc(),
                     wake=Wake())
    source = Source(ingest_config(load_settings(environ={}), None), Shared(tracker, DocRegistry(), metrics, dl), None,
                    Guard(dl, metrics))
    tracker.assign(("in", 0))
    return source, tracker, metrics


def test_good_records_become_documents_and_bad_ones_dead_letters_with_their_reason():
    source, tracker, metrics = make_source()
    docs = source.documents([Msg(orjson.dumps({"text": "disk full on upf-1", "source": "upf-1"}), 0),
                             Msg(b"{bad", 1), Msg(orjson.dumps({"text": "link down"}), 2)])
    assert [(d.offset, d.text, d.meta["source"]) for d in docs] == [(0, "disk full on upf-1", "upf-1"),
                                                                     (2, "link down", None)]
    for d in docs:
        tracker.complete(d.tp, d.epoch, d.offset, ())
    (ready,) = tracker.take_ready()
    (record,) = ready.records
    assert record.topic == "dlq" and parse_dead_letter_headers(record.headers).error_class == "invalid_json"
    assert metrics.consumed._value.get() == 3


def test_consume_errors_and_records_of_partitions_no_longer_ours_are_skipped_unregistered():
    source, tracker, metrics = make_source()
    docs = source.documents([Failed(None, 0), Failed(None, 0, code="_PARTITION_EOF"),
                             Msg(orjson.dumps({"text": "x"}), 5, _partition=3)])
    assert docs == [] and tracker.pending() == 0 and metrics.consumed._value.get() == 0


class Consumer:
    def __init__(self) -> None:
        self.seeks: list = []

    def seek(self, tp) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))

    def consume(self, num_messages: int, timeout: float) -> list:
        return []


def test_a_batch_that_cannot_be_decompressed_is_skipped_as_a_dead_letter_after_bounded_tries():
    """librdkafka fails a zstd batch that expands past receive.message.max.bytes at the same offset on
    every fetch: the offset becomes a dead letter after CONSUME_ERROR_TRIES and the consumer seeks past it."""
    source, tracker, metrics = make_source()
    consumer = Consumer()
    for _ in range(CONSUME_ERROR_TRIES - 1):
        assert source.documents([Failed(None, 7, code="_BAD_COMPRESSION")]) == []
        source.poll(consumer, 0)
    assert tracker.pending() == 0 and consumer.seeks == []
    assert source.documents([Failed(None, 7, code="_BAD_COMPRESSION")]) == []
    source.poll(consumer, 0)
    assert consumer.seeks == [("in", 0, 8)]
    (ready,) = tracker.take_ready()
    (record,) = ready.records
    dl = parse_dead_letter_headers(record.headers)
    assert (record.topic, record.key, record.value) == ("dlq", None, None)
    assert (dl.error_class, dl.source_offset) == ("bad_compression", "7") and dl.worker_version
    assert f"could not read this offset {CONSUME_ERROR_TRIES} times" in dl.error_message
    assert metrics.consume_errors.labels("_BAD_COMPRESSION")._value.get() == CONSUME_ERROR_TRIES
    assert metrics.dead_lettered.labels("bad_compression")._value.get() == 1


def test_a_passing_consume_error_is_forgotten_once_its_partition_reads_again():
    source, tracker, _ = make_source()
    for _ in range(CONSUME_ERROR_TRIES - 1):
        source.documents([Failed(None, 3, code="_BAD_MSG")])
    assert len(source.documents([Msg(orjson.dumps({"text": "x"}), 3)])) == 1
    source.documents([Failed(None, 4, code="_BAD_MSG")])
    assert tracker.pending() == 1  # only the document: the error at 4 is a first try


@settings(max_examples=200, deadline=None)
@given(polled=st.lists(st.tuples(st.sampled_from(["lines", "more", "docs"]), st.integers(0, 2), st.booleans()),
                       max_size=30))
def test_a_poll_of_line_records_is_split_by_partition_as_the_records_one_by_one_are(polled):
    """`_line_runs` takes a poll whose records are all of line topics and no consume error, and gives each
    partition its records in order; any other poll is left to the one-by-one path (None)."""
    msgs = [Msg(b"x", i, topic, part) if ok else Failed(None, i, topic, part)
            for i, (topic, part, ok) in enumerate(polled)]
    got = _line_runs(msgs, frozenset({"lines", "more"}))
    if not msgs or any(not ok or topic == "docs" for topic, _, ok in polled):
        assert got is None
        return
    want: dict = {}
    for m in msgs:
        want.setdefault((m.topic(), m.partition()), []).append(m)
    assert got == want and list(got) == list(want)
