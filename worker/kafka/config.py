"""The one home of librdkafka configuration: settings in, client properties out.

Every Kafka client Ribbon makes (the worker's consumer and producer, `ribbon
produce`, the demo, replay, validate, the benchmarks and the tests) takes its
properties from `client_config` (or `plain_config` for a bare address such as
the embedded broker's), so the security settings (`kafka.security_protocol`,
`kafka.sasl_*`, `kafka.ssl_*`) reach all of them. The `*_extra` maps still pass
any other librdkafka property through and override the derived ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from worker.config.settings import KafkaSettings, SettingsError
from worker.kafka.identity import GPU_INDEX_ENV, IdentityError, resolve_identity


@dataclass(frozen=True)
class ClientConfig:
    """librdkafka properties of each client kind for one cluster."""

    consumer: dict[str, Any]   # the worker's group consumer (read_committed under exactly_once)
    producer: dict[str, Any]   # the worker's producer (transactional under exactly_once)
    common: dict[str, Any]     # address and security only: tools' own clients and the admin client

    def tool_producer(self, **props: Any) -> dict[str, Any]:
        """An idempotent, non-transactional producer (produce, replay, benchmarks)."""
        return {**self.common, "enable.idempotence": True, "linger.ms": 5, **props}

    def tool_consumer(self, group_id: str, **props: Any) -> dict[str, Any]:
        """A consumer that commits nothing on its own (readers, replay, checks)."""
        return {**self.common, "group.id": group_id, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", **props}


def security(s: KafkaSettings) -> dict[str, Any]:
    """security.protocol, SASL and SSL properties from the typed settings (unset ones are left out)."""
    props: dict[str, Any] = {"security.protocol": s.security_protocol}
    optional = {
        "sasl.mechanism": s.sasl_mechanism, "sasl.username": s.sasl_username,
        "ssl.ca.location": s.ssl_ca_location, "ssl.certificate.location": s.ssl_certificate_location,
        "ssl.key.location": s.ssl_key_location,
    }
    props.update({k: v for k, v in optional.items() if v is not None})
    for key, secret in (("sasl.password", s.sasl_password), ("ssl.key.password", s.ssl_key_password)):
        if secret is not None:
            props[key] = secret.get_secret_value()
    return props


def client_config(s: KafkaSettings, bootstrap: str | None = None) -> ClientConfig:
    """The clients' properties; `bootstrap` (e.g. the embedded broker's address) wins over the setting."""
    servers = bootstrap or s.bootstrap_servers
    if not servers:
        raise SettingsError("kafka.bootstrap_servers", "no bootstrap servers configured", "host:port[,host:port]")
    common: dict[str, Any] = {"bootstrap.servers": servers, **security(s)}
    # Dead letters carry the original bytes plus headers: leave room above the input cap.
    message_max = s.max_message_bytes + 65_536
    fetch_max = max(52_428_800, message_max)
    consumer = {
        **common,
        "group.id": s.group_id,
        "fetch.wait.max.ms": 500,  # librdkafka's own; the embedded broker's is cut (embedded_settings)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "message.max.bytes": message_max,
        "fetch.max.bytes": fetch_max,
        "receive.message.max.bytes": max(100_000_000, fetch_max + 512),
    }
    # zstd: about twice lz4's ratio on outputs for about 1.5 times its (small) CPU
    # (bench/results/output_compression_cpu.json); brokers and consumers need Kafka 2.1+
    producer = {**common, "enable.idempotence": True, "acks": "all", "message.max.bytes": message_max,
                "compression.type": "zstd"}
    if s.delivery == "exactly_once":
        consumer["isolation.level"] = "read_committed"
        producer["transactional.id"] = f"ribbon-{s.group_id}-{_identity(s)}"
    consumer.update(s.consumer_extra)
    producer.update(s.producer_extra)
    gpu = os.environ.get(GPU_INDEX_ENV)
    if gpu and "group.instance.id" in consumer:  # under `run --gpus` each child is a member of its own: `<id>-gpuN`
        consumer["group.instance.id"] = f"{consumer['group.instance.id']}-gpu{gpu}"
    return ClientConfig(consumer, producer, common)


def offset_reset(s: KafkaSettings) -> str:
    """auto.offset.reset as the consumer gets it (kafka.consumer_extra may override "earliest")."""
    return str(s.consumer_extra.get("auto.offset.reset", "earliest")).lower()


def _identity(s: KafkaSettings) -> str:
    try:
        return str(resolve_identity(s.worker_slot))
    except IdentityError as exc:
        raise SettingsError("kafka.worker_slot", str(exc), "integer >= 0 | 'auto' | 'random'") from None


def plain_config(bootstrap: str) -> ClientConfig:
    """Properties for a bare address without security (the embedded broker in demos, benchmarks, tests)."""
    return client_config(KafkaSettings(delivery="at_least_once"), bootstrap)


EMBEDDED_FETCH_WAIT_MS = 20
EMBEDDED_SESSION_TIMEOUT_MS = 6_000


def embedded_settings(settings, bootstrap: str):
    """Settings pointed at the embedded broker. Tansu holds a group join about half of
    session.timeout.ms, so a short session keeps start-up quick. It also holds a fetch for the whole
    fetch.wait.max.ms even when data arrives meanwhile (Apache Kafka answers at once), which would add
    up to 500 ms to each document's latency: the fetch wait is cut to EMBEDDED_FETCH_WAIT_MS."""
    extra = dict(settings.kafka.consumer_extra)
    for key, cap in (("session.timeout.ms", EMBEDDED_SESSION_TIMEOUT_MS), ("fetch.wait.max.ms", EMBEDDED_FETCH_WAIT_MS)):
        extra[key] = min(int(extra.get(key, cap)), cap)
    kafka = settings.kafka.model_copy(update={"bootstrap_servers": bootstrap, "consumer_extra": extra})
    return settings.model_copy(update={"kafka": kafka})


def kafka_client_config(s: KafkaSettings, bootstrap: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(consumer, producer) librdkafka properties, as a pair: client_config's two maps."""
    c = client_config(s, bootstrap)
    return c.consumer, c.producer
