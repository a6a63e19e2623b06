"""One Kafka boundary: every client's properties come from worker.kafka.config, security included."""

from __future__ import annotations

import time

import pytest

from worker.kafka.config import client_config, embedded_settings, plain_config
from worker.config.settings import SettingsError, load_settings

SECURE = {"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "k1:9093", "RIBBON_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
          "RIBBON_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512", "RIBBON_KAFKA__SASL_USERNAME": "ribbon",
          "RIBBON_KAFKA__SASL_PASSWORD": "s3cret", "RIBBON_KAFKA__SSL_CA_LOCATION": "/etc/kafka/ca.pem",
          "RIBBON_KAFKA__SSL_CERTIFICATE_LOCATION": "/etc/kafka/client.pem",
          "RIBBON_KAFKA__SSL_KEY_LOCATION": "/etc/kafka/client.key", "RIBBON_KAFKA__SSL_KEY_PASSWORD": "kp"}
EXPECTED = {"bootstrap.servers": "k1:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "ribbon", "sasl.password": "s3cret", "ssl.ca.location": "/etc/kafka/ca.pem",
            "ssl.certificate.location": "/etc/kafka/client.pem", "ssl.key.location": "/etc/kafka/client.key",
            "ssl.key.password": "kp"}


def test_security_settings_reach_every_client_kind():
    c = client_config(load_settings(environ=SECURE).kafka)
    for conf in (c.consumer, c.producer, c.common, c.tool_producer(), c.tool_consumer("g")):
        assert EXPECTED.items() <= conf.items()
    assert "transactional.id" in c.producer and "transactional.id" not in c.tool_producer()
    assert c.consumer["isolation.level"] == "read_committed"


def test_secrets_are_not_in_the_settings_repr():
    s = load_settings(environ=SECURE)
    assert "s3cret" not in repr(s) and "kp" not in repr(s.kafka.ssl_key_password)


def test_unset_security_fields_are_left_to_librdkafka():
    c = client_config(load_settings(environ={"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "k:1"}).kafka)
    assert not any(k.startswith(("ssl.", "sasl.")) for k in c.common)
    assert c.common["security.protocol"] == "PLAINTEXT"


def test_extra_maps_still_override_the_derived_properties():
    s = load_settings(environ={"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "k:1",
                               "RIBBON_KAFKA__PRODUCER_EXTRA": '{"linger.ms": 50}',
                               "RIBBON_KAFKA__CONSUMER_EXTRA": '{"fetch.min.bytes": 1000}'})
    c = client_config(s.kafka)
    assert c.producer["linger.ms"] == 50 and c.consumer["fetch.min.bytes"] == 1000


def test_no_bootstrap_names_the_setting():
    with pytest.raises(SettingsError, match="kafka.bootstrap_servers"):
        client_config(load_settings(environ={}).kafka)


def test_embedded_broker_helpers():
    assert plain_config("127.0.0.1:9").common == {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "PLAINTEXT"}
    s = embedded_settings(load_settings(environ={}), "127.0.0.1:9")
    assert s.kafka.bootstrap_servers == "127.0.0.1:9" and s.kafka.consumer_extra["session.timeout.ms"] == 6000


def test_fetch_wait_reaches_the_consumer_and_is_cut_for_the_embedded_broker():
    s = load_settings(environ={"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "k:9092"})
    assert client_config(s.kafka).consumer["fetch.wait.max.ms"] == 500  # librdkafka's own default
    s = load_settings(environ={"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "k:9092",
                               "RIBBON_KAFKA__CONSUMER_EXTRA": '{"fetch.wait.max.ms": 80}'})
    assert client_config(s.kafka).consumer["fetch.wait.max.ms"] == 80
    # the embedded broker answers a fetch only when the wait is over, so it gets a short one; a
    # shorter one given stays
    assert client_config(embedded_settings(s, "127.0.0.1:9").kafka).consumer["fetch.wait.max.ms"] == 20
    low = load_settings(environ={"RIBBON_KAFKA__CONSUMER_EXTRA": '{"fetch.wait.max.ms": 5}'})
    assert embedded_settings(low, "127.0.0.1:9").kafka.consumer_extra["fetch.wait.max.ms"] == 5


def test_ribbon_produce_builds_its_producer_with_the_security_settings(monkeypatch, tmp_path):
    """`ribbon produce` builds its producer with kafka's SASL/SSL settings, not only producer_extra."""
    from worker.cli import main as cli, produce
    from worker.cli import preflight

    seen: dict = {}
    monkeypatch.setattr(preflight, "probe_cluster", lambda conf, timeout: None)
    monkeypatch.setattr(produce, "produce_file", lambda path, **kw: seen.update(kw["producer_conf"]) or 0)
    for k, v in SECURE.items():
        monkeypatch.setenv(k, v)
    doc = tmp_path / "docs.txt"
    doc.write_text("one line\n")
    assert cli.main(["produce", str(doc), "--topic", "t", "--no-progress"]) == 0
    assert EXPECTED.items() <= seen.items() and "transactional.id" not in seen


class _Queue:
    """A consumer's fetched-message queue; records each call as librdkafka would see it."""

    def __init__(self, queued: list, arriving: list) -> None:
        self.queued, self.arriving, self.calls = list(queued), list(arriving), []

    def consume(self, num_messages: int, timeout: float) -> list:
        self.calls.append(("consume", num_messages, timeout))
        if timeout > 0:  # consume() waits for num_messages or the timeout: the wait take() avoids
            raise AssertionError("take() called a waiting consume()")
        out, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return out

    def poll(self, timeout: float):
        self.calls.append(("poll", timeout))
        if not self.arriving:
            return None
        self.queued = self.arriving[1:]  # what came in with the first
        return self.arriving[0]


def test_take_returns_what_is_fetched_without_waiting():
    from worker.kafka.clients import take

    c = _Queue(["a", "b", "c"], [])
    assert take(c, 2, 0.05) == ["a", "b"] and c.calls == [("consume", 2, 0)]


def test_take_waits_only_for_the_first_message_then_takes_what_came_with_it():
    from worker.kafka.clients import take

    c = _Queue([], ["a", "b", "c"])
    assert take(c, 10, 0.05) == ["a", "b", "c"]
    assert c.calls == [("consume", 10, 0), ("poll", 0.05), ("consume", 9, 0)]
    assert take(_Queue([], []), 10, 0.05) == [] and take(_Queue([], ["x", "y"]), 1, 0.05) == ["x"]


def _consumer(broker, group: str, **props):
    from worker.kafka import clients

    return clients.consumer(plain_config(broker.bootstrap).tool_consumer(group, **props))


def test_start_positions_name_the_committed_offset_or_the_reset_end(broker, new_topic):
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    from worker.kafka.clients import start_positions

    topic = new_topic("start", partitions=3)
    group = f"g-{topic}"
    c = _consumer(broker, group)
    try:
        parts = [TopicPartition(topic, p) for p in range(3)]
        # a new group: nothing committed, so each partition starts at the end the reset names
        assert [(t.partition, t.offset) for t in start_positions(c, parts, "earliest")] == \
            [(0, OFFSET_BEGINNING), (1, OFFSET_BEGINNING), (2, OFFSET_BEGINNING)]
        assert {t.offset for t in start_positions(c, parts, "latest")} == {OFFSET_END}
        c.commit(offsets=[TopicPartition(topic, 1, 7)], asynchronous=False)
        # partition 1 resumes at its commit, the others still at the reset end
        got = start_positions(c, parts, "earliest")
        assert [(t.partition, t.offset) for t in got] == [(0, OFFSET_BEGINNING), (1, 7), (2, OFFSET_BEGINNING)]
        # "error" (or an unknown policy) is librdkafka's to apply: the partitions come back as given
        assert start_positions(c, parts, "error") is parts
    finally:
        c.close()


def test_start_positions_fall_back_to_librdkafka_when_the_lookup_fails():
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from worker.kafka.clients import start_positions

    class Failing:
        def committed(self, parts, timeout):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    class PartlyFailing:
        def committed(self, parts, timeout):
            from types import SimpleNamespace

            return [SimpleNamespace(topic=p.topic, partition=p.partition, offset=-1001,
                                    error=KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)) for p in parts]

    parts = [TopicPartition("t", 0)]
    assert start_positions(Failing(), parts, "earliest") is parts
    assert start_positions(PartlyFailing(), parts, "earliest") is parts


def test_a_new_group_is_fed_from_the_beginning_and_a_restart_from_its_commit(broker, new_topic):
    """Through the worker's own assign callback path: the first start reads every message from offset
    0, and a restart of the group resumes exactly at the committed offsets (nothing skipped, nothing
    read again)."""
    from confluent_kafka import TopicPartition

    from worker.kafka import clients
    from worker.kafka.clients import start_positions

    topic = new_topic("resume", partitions=2)
    prod = clients.producer(plain_config(broker.bootstrap).tool_producer())
    for i in range(40):
        prod.produce(topic, value=str(i).encode(), partition=i % 2)
    prod.flush(10)
    group = f"g-{topic}"

    def read(expect: int) -> list:
        c = _consumer(broker, group, **{"session.timeout.ms": 6000,
                                        "partition.assignment.strategy": "cooperative-sticky"})
        c.subscribe([topic], on_assign=lambda cc, ps: cc.incremental_assign(start_positions(cc, ps, "earliest")))
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < expect and time.monotonic() < deadline:
            got += [m for m in c.consume(50, 0.1) if m.error() is None]
        if expect == 40:
            c.commit(offsets=[TopicPartition(topic, 0, 15), TopicPartition(topic, 1, 12)], asynchronous=False)
        c.close()
        return sorted((m.partition(), m.offset()) for m in got)

    assert read(40) == sorted((p, o) for p in range(2) for o in range(20))
    assert read(13) == sorted([(0, o) for o in range(15, 20)] + [(1, o) for o in range(12, 20)])
