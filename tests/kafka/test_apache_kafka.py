"""What only Apache Kafka shows: aborted records hidden, transactions timed out by the broker, fenced
producers, topic size limits. The broker is one KRaft node from Maven Central jars (conftest `kafka`).

Tansu, the embedded broker, does none of the first three (docs/operating.md, "Brokers"), so these
paths of the worker are tested here only. Under read_committed every check is strict: each input
summarized exactly once, no repeat.
"""

from __future__ import annotations

import dataclasses
import random
import signal
import threading
import time
import uuid

import orjson
import pytest
from helpers import (by_id, consume_all, frozen, mixed_docs, produce, reader, start_worker, topics, wait_for,
                     worker_env)

from worker.pipeline.configs import delivery_config
from worker.cli.main import main
from worker.kafka import clients
from worker.kafka.clients import Clients
from worker.kafka.config import client_config
from worker.pipeline.delivery import Delivery, FatalDeliveryError
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker, Record
from worker.config.settings import KafkaSettings, Settings

pytestmark = pytest.mark.kafka_apache

TXN_TIMEOUT_MS = 3000  # the broker aborts a transaction open longer (it looks every second: tests/apache_kafka.py)


@pytest.fixture
def kafka_topic(kafka):
    """A fresh topic on the session's Apache Kafka: kafka_topic("in", partitions=3)."""

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        kafka.create_topics({name: partitions})
        return name

    return make


def transactional(bootstrap: str, tid: str | None = None, **props):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid or f"t-{uuid.uuid4().hex[:8]}",
                  "enable.idempotence": True, "acks": "all", **props})
    p.init_transactions(30)
    return p


def last_stable_offset(bootstrap: str, topic: str) -> int:
    """Partition 0's last stable offset: what a read_committed reader's end offset query answers."""
    from confluent_kafka import TopicPartition

    c = reader(bootstrap, f"lso-{uuid.uuid4().hex[:8]}", "read_committed")
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()


def values(bootstrap: str, topic: str, expected: int, timeout_s: float = 10) -> list[bytes]:
    return [m.value() for m in consume_all(bootstrap, topic, expected, timeout_s, isolation="read_committed")]


# ---- the broker itself: what the worker's exactly-once rests on --------------------------------

def test_read_committed_hides_aborted_records(kafka, kafka_topic):
    topic = kafka_topic("t")
    p = transactional(kafka.bootstrap)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.flush(10)  # on the broker before the abort (an abort purges what was not sent)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    # the aborted record comes first in the log: a reader that was given it would return it first
    assert values(kafka.bootstrap, topic, 1, timeout_s=60) == [b"committed"]
    assert len(consume_all(kafka.bootstrap, topic, 2, timeout_s=60)) == 2  # read_uncommitted sees both


def test_the_broker_aborts_a_transaction_past_its_timeout(kafka, kafka_topic):
    from confluent_kafka import KafkaException

    topic = kafka_topic("t")
    p = transactional(kafka.bootstrap, **{"transaction.timeout.ms": TXN_TIMEOUT_MS})
    p.begin_transaction()
    p.produce(topic, b"late")
    p.flush(10)
    # The broker aborts it: its abort marker (offset 1) moves the last stable offset past "late" (to 2).
    wait_for(lambda: last_stable_offset(kafka.bootstrap, topic) == 2, TXN_TIMEOUT_MS / 1000 + 30,
             "the broker to abort the transaction")
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    after = transactional(kafka.bootstrap)
    after.begin_transaction()
    after.produce(topic, b"after")
    after.commit_transaction(30)
    assert values(kafka.bootstrap, topic, 1, timeout_s=60) == [b"after"]  # "late" (before it) was aborted


def test_a_new_producer_with_the_same_id_fences_the_old_one_for_good(kafka, kafka_topic):
    from confluent_kafka import KafkaException

    topic = kafka_topic("t")
    tid = f"fence-{uuid.uuid4().hex[:8]}"
    old = transactional(kafka.bootstrap, tid)
    old.begin_transaction()
    old.produce(topic, b"zombie")
    old.flush(10)
    new = transactional(kafka.bootstrap, tid)  # init_transactions aborts the old one's open transaction
    new.begin_transaction()
    new.produce(topic, b"new")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        old.commit_transaction(10)
    assert exc.value.args[0].fatal(), exc.value.args[0]  # Tansu answers with a retriable error instead
    assert values(kafka.bootstrap, topic, 1, timeout_s=60) == [b"new"]  # "zombie" (before it) was aborted


# ---- the worker's delivery: a transaction held past its timeout is redone exactly once ------------

class SlowFirstCommit:
    """The real producer, but the first commit_transaction waits past the transaction timeout first, as a
    delivery thread frozen (GC pause, SIGSTOP, a stalled host) with a transaction open would."""

    def __init__(self, producer, hold_s: float) -> None:
        self._p, self.hold_s, self.held = producer, hold_s, threading.Event()

    def commit_transaction(self, *args):
        if not self.held.is_set():
            self.held.set()
            time.sleep(self.hold_s)
        return self._p.commit_transaction(*args)

    def __getattr__(self, name):
        return getattr(self._p, name)


def test_a_transaction_held_past_its_timeout_is_aborted_by_the_broker_and_redone_once(kafka, kafka_topic):
    """The broker aborts the transaction and bumps the producer's epoch: the late commit fails as fenced
    (fatal), delivery stops without marking anything committed (the worker exits 1), and the restarted
    worker, fed the same inputs again, commits each output once."""
    src, out, dlq = kafka_topic("in"), kafka_topic("out"), kafka_topic("dlq")
    settings = Settings(kafka=KafkaSettings(
        input_topics=(src,), output_topic=out, dlq_topic=dlq, group_id=f"g-{uuid.uuid4().hex[:6]}",
        worker_slot=0, delivery_stuck_s=60.0,
        producer_extra={"transaction.timeout.ms": TXN_TIMEOUT_MS}))
    conf = client_config(settings.kafka, bootstrap=kafka.bootstrap)
    consumer = clients.consumer(conf.consumer)
    tp = (src, 0)

    def deliver(make_producer) -> tuple[Delivery, OffsetTracker, Metrics]:
        """A worker's delivery (fresh state, as after a restart) given the ten inputs, until done or failed."""
        tracker, metrics = OffsetTracker(), Metrics()
        config = dataclasses.replace(delivery_config(settings), txn_call_timeout_s=2.0)  # shorter than 1/12 of stuck
        delivery = Delivery(config=config, make_producer=make_producer, tracker=tracker, metrics=metrics)
        delivery.commits.publish(consumer.consumer_group_metadata())
        thread = threading.Thread(target=delivery.run, name="ribbon-delivery", daemon=True)
        thread.start()
        try:
            assert delivery.started.wait(30) and delivery.error is None
            epoch = tracker.assign(tp)
            for off in range(10):
                assert tracker.see(tp, epoch, off)
                tracker.complete(tp, epoch, off, (Record(out, b"k%d" % off, b"v%d" % off),))
            delivery.wake()
            wait_for(lambda: metrics.txn_commits._value.get() >= 1 or delivery.error is not None, 60,
                     "a committed transaction or a failure")
        finally:
            delivery.stop()
            delivery.wake()
            thread.join(30)
        return delivery, tracker, metrics

    slow: list[SlowFirstCommit] = []

    def slow_producer():
        slow.append(SlowFirstCommit(clients.producer(conf.producer), hold_s=TXN_TIMEOUT_MS / 1000 + 3))
        return slow[-1]

    try:
        first, tracker, metrics = deliver(slow_producer)
        assert slow[0].held.is_set()
        assert isinstance(first.error, FatalDeliveryError) and "fenced" in str(first.error), first.error
        assert metrics.txn_commits._value.get() == 0  # nothing committed
        second, tracker, metrics = deliver(Clients(conf).producer)  # the restart: same transactional.id
        assert second.error is None and tracker.pending() == 0 and metrics.txn_commits._value.get() == 1
    finally:
        consumer.close()
    got = values(kafka.bootstrap, out, 11, timeout_s=10)
    assert sorted(got) == sorted(b"v%d" % i for i in range(10))  # each once: the aborted copies hidden


# ---- the worker: zombie fencing, size limits, replay of what it wrote ------------------------------

def test_a_frozen_worker_is_fenced_by_its_restart_and_commits_nothing(kafka, kafka_topic, tiny_model, tmp_path):
    """A worker stops answering (SIGSTOP) and is replaced by a new one with the same transactional id, as
    a supervisor does on a hung process. The new one's init_transactions fences the old producer; when the
    old one wakes up and tries to deliver, it must stop (exit 1) without committing: every input
    summarized exactly once. (A fenced producer learns it at its next transactional call: more input is
    produced after the wake-up so that the old worker, back in the group, has work to try.)"""
    t = topics(kafka_topic)
    docs = mixed_docs(1600, seed=41)  # 400 first, then up to 1,200 while the old worker wakes
    produce(kafka.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs[:400]])
    env = worker_env(kafka.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t,
                     RIBBON_KAFKA__CONSUMER_EXTRA='{"session.timeout.ms": 3000}', RIBBON_KAFKA__DELIVERY_STUCK_S="24")
    old = start_worker(env, tmp_path / "old.log")
    new = None
    try:
        consume_all(kafka.bootstrap, t["output_topic"], 100, timeout_s=180, isolation="read_committed")
        with frozen(old.pid):
            new = start_worker(env, tmp_path / "new.log")  # same group, same slot: same transactional.id
            consume_all(kafka.bootstrap, t["output_topic"], 300, timeout_s=180, isolation="read_committed")
        # Input keeps coming, a few records over every partition each second, until the old worker has
        # met its fencing: whichever partitions the rebalance gives it back, it gets work there (one burst
        # could be summarized by the new worker before the old one is back in the group).
        deadline, sent = time.monotonic() + 120, 400
        while old.poll() is None and time.monotonic() < deadline:
            batch = docs[sent:sent + 10] if sent < len(docs) else []
            if batch:
                produce(kafka.bootstrap, t["input_topic"], [orjson.dumps(d) for d in batch],
                        [f"m{sent + i}".encode() for i in range(len(batch))])
                sent += len(batch)
            time.sleep(1.0)
        assert old.wait(max(1.0, deadline - time.monotonic())) == 1, (tmp_path / "old.log").read_text()[-3000:]
        docs = docs[:sent]
        consume_all(kafka.bootstrap, t["output_topic"], len(docs), timeout_s=300, isolation="read_committed")
    finally:
        for p in (old, new):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(90)
    assert new.returncode == 0, (tmp_path / "new.log").read_text()[-3000:]
    assert "fenced" in (tmp_path / "old.log").read_text().lower()
    got = consume_all(kafka.bootstrap, t["output_topic"], len(docs) + 1, timeout_s=5, isolation="read_committed")
    outs = by_id(got)
    assert set(outs) == {d["id"] for d in docs} and len(got) == len(docs)


def test_a_dead_letter_above_the_topic_limit_goes_without_its_value_and_replays(kafka, tiny_model, tmp_path,
                                                                               capsys):
    """The dead-letter topic refuses records above its max.message.bytes (Tansu accepts any size): the record
    goes without its value (header error.value_dropped), nothing behind it stalls, and `replay dlq` reads
    the worker's transactional dead-letter topic to its end."""
    names = {"input_topic": f"in-{uuid.uuid4().hex[:8]}", "output_topic": f"out-{uuid.uuid4().hex[:8]}",
             "dlq_topic": f"dlq-{uuid.uuid4().hex[:8]}"}
    kafka.create_topics([names["input_topic"], names["output_topic"]])
    kafka.create_topics([names["dlq_topic"]], config={"max.message.bytes": "100000"})
    docs = mixed_docs(50, seed=15)
    # random bytes: invalid UTF-8 that the producer's compression (zstd by default) cannot shrink under the limit
    big_value = random.Random(15).randbytes(300_000)
    vals = [orjson.dumps(d) for d in docs[:25]] + [big_value] + [orjson.dumps(d) for d in docs[25:]]
    vals.insert(10, b'{"text": "unterminated')
    produce(kafka.bootstrap, names["input_topic"], vals)
    log = tmp_path / "worker.log"
    proc = start_worker(worker_env(kafka.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **names), log)
    try:
        got = consume_all(kafka.bootstrap, names["output_topic"], len(docs), timeout_s=300,
                          isolation="read_committed")
        dlq = consume_all(kafka.bootstrap, names["dlq_topic"], 2, timeout_s=60, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0, log.read_text()[-3000:]
    assert set(by_id(got)) == {d["id"] for d in docs} and len(got) == len(docs)
    assert len(dlq) == 2
    big = next(m for m in dlq if dict(m.headers())["error.class"] == b"invalid_utf8")
    headers = dict(big.headers())
    assert big.value() is None and headers["error.value_dropped"] == b"msg_size_too_large"
    assert headers["source.offset"] == b"26"
    flags = ["replay", "dlq", "--bootstrap-servers", kafka.bootstrap, "--dlq-topic", names["dlq_topic"],
             "--no-progress", "--timeout", "30"]
    assert main([*flags, "--dry-run"]) == 0
    assert "would replay 2 of 2 dead letters (by class: invalid_json 1, invalid_utf8 1)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # the valueless one cannot go back: said, exit 1; the other goes
        main([*flags, "--error-class", "invalid_utf8"])
    assert exc.value.code == 1 and "has no value" in capsys.readouterr().err
    assert main([*flags, "--error-class", "invalid_json"]) == 0
    back = consume_all(kafka.bootstrap, names["input_topic"], len(vals) + 1, timeout_s=10)
    assert len(back) == len(vals) + 1 and back[-1].value() == b'{"text": "unterminated'


def test_validate_says_when_transactions_cannot_start(private_kafka, capsys):
    """A cluster whose transaction state log needs more brokers than it has: init_transactions never
    succeeds; `run` would wait for ever, validate says FAIL transactions."""
    b = private_kafka(**{"transaction.state.log.replication.factor": "3"})
    b.create_topics(["in", "out", "dlq"])
    code = main(["validate", "--bootstrap-servers", b.bootstrap, "--input-topic", "in", "--output-topic", "out",
                 "--dlq-topic", "dlq", "--mode", "digest", "--timeout", "5"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL transactions: init_transactions failed within 5 s" in out
    assert "ok   broker" in out
