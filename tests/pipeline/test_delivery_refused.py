"""A record the broker refuses must not hold its partition for good.

Apache Kafka refuses records above the topic's max.message.bytes (1 MB by default, value, key and
headers together) in the delivery report, which fails the whole transaction; retried as it was,
it fails again, for ever. The delivery stage sends in its place a dead letter sure to fit (no value,
no key, the input's headers only when small, the coordinates and the reason: DeadLetters.refused),
and when even that is refused, nothing (a logged, counted skip). The producer here is a fake that
refuses like the broker does (the real case runs in tests/kafka/test_refused_records.py).
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from worker import __version__
from worker.pipeline.configs import delivery_config
from worker.config.settings import KafkaSettings, Settings
from worker.kafka.headers import output_headers
from worker.kafka.headers import parse_dead_letter_headers
from worker.observability.metrics import Metrics
from worker.pipeline.deadletter import HEADER_BUDGET
from worker.pipeline.delivery import Delivery
from worker.pipeline.tracker import OffsetTracker, Record

LIMIT = 1000
TP = ("in", 0)


class RefusingProducer:
    """Transactions and delivery reports as librdkafka gives them, with a broker that refuses big records."""

    def __init__(self, refuse_topic: str | None = None, refuse_at_produce: bool = False) -> None:
        self.refuse_topic, self.refuse_at_produce = refuse_topic, refuse_at_produce
        self.pending: list[tuple] = []
        self.committed: list[tuple] = []
        self.txn: list[tuple] = []
        self.offsets: list = []
        self.failed = False

    def begin_transaction(self) -> None:
        self.txn, self.failed = [], False

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None) -> None:
        rec = (topic, key, value, tuple(headers or ()))
        if self.refuse_at_produce and self._refused(rec):  # librdkafka's own message.max.bytes check
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.pending.append((rec, on_delivery))

    def _refused(self, rec: tuple) -> bool:
        size = len(rec[1] or b"") + len(rec[2] or b"") + sum(len(k) + len(v or b"") for k, v in rec[3])
        return size > LIMIT or rec[0] == self.refuse_topic

    def poll(self, timeout: float = 0) -> int:
        served, self.pending = self.pending, []
        for rec, cb in served:
            err = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if self._refused(rec) else None
            self.failed |= err is not None
            if err is None:
                self.txn.append(rec)
            if cb is not None:
                cb(err, None)
        return len(served)

    def send_offsets_to_transaction(self, offsets, metadata, timeout: float = -1) -> None:
        self.offsets = offsets

    def commit_transaction(self, timeout: float = -1) -> None:
        self.poll()
        if self.failed:
            raise KafkaException(KafkaError(KafkaError._INCONSISTENT, "a record failed", txn_requires_abort=True))
        self.committed.extend(self.txn)

    def abort_transaction(self, timeout: float = -1) -> None:
        self.txn = []


def _delivery(producer: RefusingProducer) -> tuple[Delivery, OffsetTracker, Metrics]:
    settings = Settings(kafka=KafkaSettings(input_topics=("in",), output_topic="out", dlq_topic="dlq"))
    tracker, metrics = OffsetTracker(), Metrics()
    delivery = Delivery(config=delivery_config(settings), make_producer=lambda: producer, tracker=tracker,
                        metrics=metrics)
    delivery.producer = producer  # what run() does on its thread
    return delivery, tracker, metrics


def _complete(tracker: OffsetTracker, records) -> None:
    epoch = tracker.assign(TP)
    for off, rec in enumerate(records):
        tracker.see(TP, epoch, off)
        tracker.complete(TP, epoch, off, (rec,))


def _summary(off: int, key: bytes = b"k", headers=(), value: bytes = b"summary") -> Record:
    return Record("out", key, value, output_headers(headers, "in", 0, off))


def _dead_letter(off: int, value: bytes, key: bytes = b"k", headers=()) -> Record:
    ribbon = (("error.class", b"oversize"), ("error.message", b"too big"), ("source.topic", b"in"),
              ("source.partition", b"0"), ("source.offset", str(off).encode()),
              ("worker.version", __version__.encode()))
    return Record("dlq", key, value, (*headers, *ribbon))


def test_a_dead_letter_the_broker_refuses_goes_without_its_value_and_keeps_its_reason():
    producer = RefusingProducer()
    delivery, tracker, metrics = _delivery(producer)
    _complete(tracker, (_summary(0), _dead_letter(1, b"x" * (LIMIT + 1), headers=(("trace", b"t1"),)),
                        _summary(2)))
    done = [delivery.step(group_metadata=object()) for _ in range(3)]
    assert done == [0, 3, 0], "refused once, then committed without the value"
    assert [(r[0], r[1], r[2]) for r in producer.committed] == [("out", b"k", b"summary"), ("dlq", None, None),
                                                                ("out", b"k", b"summary")]
    headers = producer.committed[1][3]
    dl = parse_dead_letter_headers(headers)
    assert (dl.error_class, dl.source_offset, dl.worker_version) == ("oversize", "1", __version__)
    assert dl.error_message.startswith("too big [its dead letter (value 1001 B, key 1 B")
    assert dict(headers)["error.value_dropped"] == b"msg_size_too_large" and ("trace", b"t1") in headers
    assert tracker.pending() == 0 and not delivery._replaced
    assert metrics.dead_lettered.labels("oversize")._value.get() == 1


def test_a_summary_refused_for_its_headers_or_key_becomes_a_dead_letter_without_them():
    """The input's near-limit header (or key) rides on its summary: the dead letter drops value, key and
    headers, and keeps the coordinates, error.class, error.message and worker.version."""
    producer = RefusingProducer()
    delivery, tracker, metrics = _delivery(producer)
    big_header = (("blob", b"h" * (HEADER_BUDGET + 1)),)
    _complete(tracker, (_summary(0, headers=big_header), _summary(1, key=b"K" * LIMIT), _summary(2)))
    assert [delivery.step(group_metadata=object()) for _ in range(2)] == [0, 3]
    out = [(r[0], r[1], r[2]) for r in producer.committed]
    assert out == [("dlq", None, None), ("dlq", None, None), ("out", b"k", b"summary")]
    for off, (_, _, _, headers) in enumerate(producer.committed[:2]):
        dl = parse_dead_letter_headers(headers)
        assert (dl.error_class, dl.source_topic, dl.source_offset, dl.worker_version) == \
            ("output_refused", "in", str(off), __version__)
        assert "was refused: msg_size_too_large" in dl.error_message
    assert "blob" not in dict(producer.committed[0][3])
    assert dict(producer.committed[0][3])["error.headers_dropped"] == f"1 headers, {HEADER_BUDGET + 5} B".encode()
    assert metrics.dead_lettered.labels("output_refused")._value.get() == 2


def test_a_record_refused_at_produce_goes_as_its_dead_letter_in_the_same_transaction():
    producer = RefusingProducer(refuse_at_produce=True)
    delivery, tracker, _ = _delivery(producer)
    _complete(tracker, (_summary(0, value=b"s" * (LIMIT + 1)), _summary(1)))
    assert delivery.step(group_metadata=object()) == 2
    assert [(r[0], r[2]) for r in producer.committed] == [("dlq", None), ("out", b"summary")]


def test_when_even_the_smallest_dead_letter_is_refused_the_offset_is_skipped_logged_and_counted(caplog):
    producer = RefusingProducer(refuse_topic="dlq")
    delivery, tracker, metrics = _delivery(producer)
    _complete(tracker, (_summary(0), _summary(1, value=b"s" * (LIMIT + 1)), _summary(2)))
    assert [delivery.step(group_metadata=object()) for _ in range(3)] == [0, 0, 3]
    assert [(r[0], r[2]) for r in producer.committed] == [("out", b"summary"), ("out", b"summary")]
    assert producer.offsets[0].offset == 3 and tracker.pending() == 0
    assert metrics.skipped.labels("msg_size_too_large")._value.get() == 1
    assert "input in/0@1 skipped: even its dead letter without value, key and headers was refused" in caplog.text
