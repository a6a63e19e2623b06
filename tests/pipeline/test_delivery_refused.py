"""A record the broker refuses as too large must not hold its partition for good.

Apache Kafka refuses records above the topic's max.message.bytes (1 MB by default) in the
delivery report, which fails the whole transaction; retried as it was, it fails again, for
ever. The delivery stage sends it the next time without its value (header
error.value_dropped). The producer here is a fake that refuses like the broker does
(Tansu accepts any size, so the real case runs in test_worker_docker.py).
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from worker.pipeline.delivery import VALUE_DROPPED, Delivery, DeliveryConfig
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker, Record
from worker.config.settings import KafkaSettings, Settings

LIMIT = 1000
TP = ("in", 0)


class RefusingProducer:
    """Transactions and delivery reports as librdkafka gives them, with a broker that refuses big records."""

    def __init__(self) -> None:
        self.pending: list[tuple] = []
        self.committed: list[tuple] = []
        self.txn: list[tuple] = []
        self.offsets: list = []
        self.failed = False

    def begin_transaction(self) -> None:
        self.txn, self.failed = [], False

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None) -> None:
        self.pending.append(((topic, key, value, tuple(headers or ())), on_delivery))

    def poll(self, timeout: float = 0) -> int:
        served, self.pending = self.pending, []
        for rec, cb in served:
            err = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE) if rec[2] is not None and len(rec[2]) > LIMIT else None
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


def test_a_dead_letter_the_broker_refuses_goes_without_its_value():
    settings = Settings(kafka=KafkaSettings(input_topics=("in",), output_topic="out", dlq_topic="dlq"))
    tracker = OffsetTracker()
    producer = RefusingProducer()
    delivery = Delivery(config=DeliveryConfig(settings), make_producer=lambda: producer, tracker=tracker, metrics=Metrics())
    delivery.producer = producer  # what run() does on its thread
    epoch = tracker.assign(TP)
    big = Record("dlq", b"k1", b"x" * (LIMIT + 1), (("error.class", b"oversize"),))
    for off, rec in enumerate((Record("out", b"k0", b"summary"), big, Record("out", b"k2", b"summary 2"))):
        tracker.see(TP, epoch, off)
        tracker.complete(TP, epoch, off, (rec,))
    done = [delivery.step(group_metadata=object()) for _ in range(3)]
    assert done == [0, 3, 0], "refused once, then committed without the value"
    assert [(r[0], r[1], r[2]) for r in producer.committed] == [("out", b"k0", b"summary"), ("dlq", b"k1", None),
                                                                ("out", b"k2", b"summary 2")]
    assert producer.committed[1][3] == (("error.class", b"oversize"), VALUE_DROPPED)
    assert tracker.pending() == 0 and not delivery._refused
