"""The Apache Kafka launcher of the tests (tests/apache_kafka.py), without starting a broker."""

from __future__ import annotations

import base64

import pytest
from apache_kafka import ApacheKafka, cluster_id, jars_dir, kafka_version

from worker.kafka.broker import BrokerError


def test_the_pom_pins_one_kafka_4():
    assert kafka_version().startswith("4.")


def test_without_java_or_mvn_the_jars_cannot_be_fetched(tmp_path, monkeypatch):
    """The conftest turns this BrokerError into a skip, or a failure under CI=true."""
    monkeypatch.setenv("RIBBON_KAFKA_JARS", str(tmp_path / "jars"))
    monkeypatch.setenv("PATH", str(tmp_path))  # neither java nor mvn
    with pytest.raises(BrokerError, match="java"):
        jars_dir()


def test_a_cluster_id_is_sixteen_random_bytes_in_url_safe_base64():
    ids = {cluster_id() for _ in range(50)}
    assert len(ids) == 50
    for i in ids:
        assert len(i) == 22 and len(base64.urlsafe_b64decode(i + "==")) == 16


def test_one_node_properties_carry_the_transaction_log_for_one_broker_and_the_overrides(tmp_path):
    props = ApacheKafka(overrides={"transaction.max.timeout.ms": "10000"}).properties(tmp_path)
    assert props["transaction.state.log.replication.factor"] == "1" == props["transaction.state.log.min.isr"]
    assert props["transaction.max.timeout.ms"] == "10000"
    assert props["process.roles"] == "broker,controller" and props["log.dirs"] == str(tmp_path)
    assert props["listeners"].startswith("PLAINTEXT://127.0.0.1:")
