"""Planner, ingest and delivery, each with fakes of its neighbours (no broker, no model)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException

from worker.pipeline.configs import delivery_config
from worker.kafka.headers import parse_dead_letter_headers
from worker.pipeline.delivery import Delivery
from worker.observability.metrics import Metrics
from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.tracker import OffsetTracker, Record
from worker.config.settings import load_settings
from ingest_fakes import FakePacker, Msg, PausingConsumer, counts, make_ingest, words

# ---- planner ---------------------------------------------------------------------------


def test_planner_keeps_short_documents_whole_and_chunks_long_ones_by_lines():
    p = Planner(words, counts, PlanLimits(50, max_new_tokens=4))
    assert p.plan("a b c").prompts == (tuple(words("a b c")),)
    long = "\n".join(" ".join(["w"] * 10) for _ in range(12))  # 120 words: over a 48-token chunk
    plan = p.plan(long)
    assert len(plan.prompts) > 1 and all(len(q) <= 50 for q in plan.prompts)
    assert sum(len(q) - 2 for q in plan.prompts) == 120 and not plan.truncated  # nothing dropped


def test_planner_truncates_only_when_asked():
    p = Planner(words, counts, PlanLimits(20, max_new_tokens=2, truncate=True))
    plan = p.plan(" ".join(["w"] * 40))
    assert plan.truncated and len(plan.prompts) == 1 and len(plan.prompts[0]) <= 20


def test_planner_refuses_a_budget_that_cannot_combine_summaries():
    with pytest.raises(ValueError, match="cannot combine summaries"):
        Planner(words, counts, PlanLimits(30, max_new_tokens=20))


# ---- ingest ----------------------------------------------------------------------------


def test_ingest_submits_good_documents_and_dead_letters_bad_ones():
    ing, tracker, registry = make_ingest()
    ing._ingest([Msg(orjson.dumps({"text": "disk full on upf-1"}), 0), Msg(b'{"text": ', 1), Msg(b"plain text", 2)])
    assert [s[1] for s in ing.packer.submitted] == [words("disk full on upf-1"), words("plain text")]
    assert len(registry) == 2 and tracker.pending() == 3
    assert tracker.take_ready() == []  # offset 0 is on its way: the dead letter at 1 waits behind it
    epoch = tracker.epoch(("in", 0))
    tracker.complete(("in", 0), epoch, 0, ())
    (ready,) = tracker.take_ready()
    assert ready.offsets == (0, 1)
    assert parse_dead_letter_headers(ready.records[0].headers).error_class == "invalid_json"


def test_ingest_notes_each_records_age_and_stamps_when_a_document_reached_the_packer():
    ing, _, registry = make_ingest()
    t0 = time.monotonic()
    ing._ingest([Msg(orjson.dumps({"text": "disk full on upf-1"}), 0, _ts=time.time() - 3.0),
                 Msg(b"plain text", 1)])  # no timestamp: not counted
    get = ing.metrics.registry.get_sample_value
    assert get("ribbon_record_age_seconds_count") == 1
    assert 2.9 < get("ribbon_record_age_seconds_sum") < 4.0
    docs = [s.doc for s in registry._seqs.values()]
    assert len(docs) == 2 and all(t0 <= d.received <= d.packed <= time.monotonic() for d in docs)


def test_ingest_dead_letters_a_document_whose_digest_pass_failed_and_submits_the_rest():
    from worker.digest.prepared import Prepared

    from worker.pipeline.preprocess import Batch

    ing, tracker, registry = make_ingest()
    real = ing.preprocess.submit

    def submit(texts, sources, kinds, windows=None):  # the pass of the second document fails (in a pool process, say)
        out = real(texts, sources, kinds, windows).result()
        return Batch(done=[Prepared(None, [], None, None, 0.0, "ValueError: boom") if "boom" in t else p
                           for t, p in zip(texts, out)])

    ing.preprocess.submit = submit
    ing._ingest([Msg(orjson.dumps({"text": "disk full on upf-1"}), 0), Msg(orjson.dumps({"text": "boom now"}), 1),
                 Msg(b"plain text", 2)])
    assert [s[1] for s in ing.packer.submitted] == [words("disk full on upf-1"), words("plain text")]
    assert all(s.doc.prepared is not None for s in registry._seqs.values())
    tracker.complete(("in", 0), tracker.epoch(("in", 0)), 0, ())
    (ready,) = tracker.take_ready()
    assert ready.offsets == (0, 1)
    h = parse_dead_letter_headers(ready.records[0].headers)
    assert (h.error_class, h.error_message) == ("digest_error", "ValueError: boom")


def test_ingest_pauses_above_the_high_watermark_and_resumes_below_the_low():
    packer = FakePacker(pending=101)
    ing, _, _ = make_ingest(packer)
    ing._backpressure()
    assert ing.paused and ing.consumer.paused == [["tp0", "tp1"]]
    packer.pending = 60  # between the marks: stays paused
    ing._backpressure()
    assert ing.consumer.resumed == []
    packer.pending = 49
    ing._backpressure()
    assert not ing.paused and ing.consumer.resumed == [["tp0", "tp1"]]


# ---- delivery --------------------------------------------------------------------------


class FakeProducer:
    """Records the calls; `fail_commit` makes the next commit raise an abortable error."""

    def __init__(self, fail_commit: bool = False) -> None:
        self.calls: list[str] = []
        self.produced: list[tuple[str, bytes | None]] = []
        self.fail_commit = fail_commit

    def begin_transaction(self, *_timeout) -> None:
        self.calls.append("begin")

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None) -> None:
        self.produced.append((topic, value))
        if on_delivery is not None:
            on_delivery(None, None)

    def poll(self, _t: float = 0) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets, metadata, *_timeout) -> None:
        self.calls.append(f"offsets {[(o.partition, o.offset) for o in offsets]}")

    def commit_transaction(self, *_timeout) -> None:
        if self.fail_commit:
            self.fail_commit = False
            raise KafkaException(KafkaError(KafkaError._STATE, "abortable", txn_requires_abort=True))
        self.calls.append("commit")

    def abort_transaction(self, *_timeout) -> None:
        self.calls.append("abort")

    def flush(self, _t: float = 0) -> int:
        return 0


def make_delivery(producer: FakeProducer, delivery: str = "exactly_once"):
    settings = load_settings(environ={"RIBBON_KAFKA__DELIVERY": delivery})
    tracker = OffsetTracker()
    d = Delivery(config=delivery_config(settings), make_producer=lambda: producer, tracker=tracker, metrics=Metrics())
    d.producer = producer
    d.commits.publish(object())
    e = tracker.assign(("in", 0))
    for off in (0, 1, 2):
        tracker.see(("in", 0), e, off)
    for off in (0, 1):
        tracker.complete(("in", 0), e, off, (Record("ribbon.summaries", None, b"s%d" % off),))
    return d, tracker


def test_delivery_sends_the_complete_prefix_and_its_offsets_in_one_transaction():
    producer = FakeProducer()
    d, tracker = make_delivery(producer)
    assert d.step() == 2
    assert producer.calls == ["begin", "offsets [(0, 2)]", "commit"]
    assert producer.produced == [("ribbon.summaries", b"s0"), ("ribbon.summaries", b"s1")]
    assert tracker.progress(("in", 0)) == (2, 1)  # committed up to 2, offset 2 still unfinished


def test_an_aborted_transaction_puts_the_runs_back_and_the_next_step_sends_them_again():
    producer = FakeProducer(fail_commit=True)
    d, tracker = make_delivery(producer)
    assert d.step() == 0
    assert producer.calls[-1] == "abort" and tracker.pending() == 3
    assert d.step() == 2 and producer.calls[-1] == "commit"
    assert producer.produced[-2:] == [("ribbon.summaries", b"s0"), ("ribbon.summaries", b"s1")]


def test_at_least_once_posts_the_offsets_to_the_ingest_thread_after_delivery():
    producer = FakeProducer()
    d, _ = make_delivery(producer, delivery="at_least_once")
    assert d.step() == 2
    assert "begin" not in producer.calls
    assert [(tp.partition, tp.offset) for tp in d.commits.take()] == [(0, 2)]


@dataclass
class AssigningConsumer(PausingConsumer):
    """Committed offsets as a group coordinator holds them; records what ingest assigns."""

    offsets: dict = field(default_factory=dict)
    assigned: list = field(default_factory=list)

    def committed(self, parts, timeout):
        from confluent_kafka import TopicPartition

        return [TopicPartition(p.topic, p.partition, self.offsets.get(p.partition, -1001)) for p in parts]

    def incremental_assign(self, parts) -> None:
        self.assigned.extend((p.topic, p.partition, p.offset) for p in parts)


def test_an_assignment_starts_each_partition_at_its_commit_or_at_the_reset_end():
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    ing, tracker, _ = make_ingest()
    ing.consumer = AssigningConsumer(offsets={1: 42})
    ing.rebalance.on_assign(ing.consumer, [TopicPartition("in", 0), TopicPartition("in", 1)])
    # named to librdkafka: no partition is left to its reset path (and its fixed 100 ms wait)
    assert ing.consumer.assigned == [("in", 0, OFFSET_BEGINNING), ("in", 1, 42)]
    assert tracker.epoch(("in", 1)) is not None and ing.assigned.is_set()
