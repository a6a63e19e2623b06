"""The settings' groups (kafka, digest, pipeline, windowing, redaction, server; the model-side ones are in
worker/config/model.py): typed, frozen, validated; the root and its loading are in worker/config/settings.py
(DESIGN.md section 3)."""

from __future__ import annotations

import re
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator



ClientValue = Union[str, int, float, bool]
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_TOPIC_TEXT = "topic name (1-249 of A-Z a-z 0-9 . _ -)"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
# host:port, host may be a name, IPv4 or [IPv6]; an optional PROTOCOL:// prefix as librdkafka allows.
_BOOTSTRAP = re.compile(r"(?:[A-Za-z_]+://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):"
                        r"(?:6553[0-5]|655[0-2]\d|65[0-4]\d\d|6[0-4]\d{3}|[1-5]\d{4}|[1-9]\d{0,3})")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


def _allowed(text: str) -> Any:
    """Field(json_schema_extra=...) note for docs and error messages."""
    return {"allowed": text}


def _topic(name: str) -> str:
    if name in (".", "..") or not _TOPIC.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid Kafka topic name")
    return name


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Group):
    bootstrap_servers: str | None = Field(
        None, description="host:port[,host:port]; unset starts the embedded broker (demo, tests)",
        json_schema_extra=_allowed("host:port[,host:port] (port 1-65535; optional)"),
    )
    input_topics: tuple[str, ...] = Field(
        ("ribbon.input",), min_length=1, description="topics to summarize",
        json_schema_extra=_allowed("list of distinct topic names (TOML array; env: JSON array or a,b)"),
    )
    output_topic: str = Field("ribbon.summaries", min_length=1, description="summaries are written here",
                              json_schema_extra=_allowed(_TOPIC_TEXT + ", not an input topic"))
    dlq_topic: str = Field("ribbon.dlq", min_length=1, description="bad input goes here with reason headers",
                           json_schema_extra=_allowed(_TOPIC_TEXT + ", not an input or the output topic"))
    group_id: str = Field("ribbon", min_length=1, description="consumer group; one worker per GPU joins it")
    delivery: Literal["exactly_once", "at_least_once"] = Field("exactly_once", description="delivery guarantee")
    worker_slot: int | Literal["auto", "ordinal", "random"] = Field(
        0, description="transactional.id suffix: a stable index, or auto (host name), ordinal (StatefulSet), "
                       "random (Apache Kafka only); see docs/operating.md",
        json_schema_extra=_allowed("integer >= 0 | 'auto' | 'ordinal' | 'random'"),
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="librdkafka security.protocol"
    )
    sasl_mechanism: str | None = Field(
        None, validate_default=True, description="required with SASL_* protocols",
        json_schema_extra=_allowed(" | ".join(repr(m) for m in SASL_MECHANISMS) + " (optional)"),
    )
    sasl_username: str | None = Field(None, description="SASL user name")
    sasl_password: SecretStr | None = Field(None, description="SASL password (secret, never logged)")
    ssl_ca_location: str | None = Field(None, description="CA certificate file (PEM) that signs the brokers' "
                                                           "certificates; unset: the system's")
    ssl_certificate_location: str | None = Field(None, description="client certificate (PEM), for mutual TLS")
    ssl_key_location: str | None = Field(None, description="client private key (PEM), for mutual TLS")
    ssl_key_password: SecretStr | None = Field(None, description="password of the client key (secret, never logged)")
    max_message_bytes: int = Field(
        4_000_000, ge=1_000, le=1_000_000_000, description="larger input goes to the dead-letter topic"
    )
    delivery_stuck_s: float = Field(
        120.0, gt=0.0, le=3_600.0,
        description="a delivery step unfinished after half of this turns /healthz red; a transaction that "
                    "cannot commit or abort within it stops the worker (exit 1) for a restart; an input unfinished this "
                    "long is logged as holding its partition's commits, and each transactional call waits a twelfth "
                    "of it at most",
    )
    consumer_extra: dict[str, ClientValue] = Field(
        default_factory=dict, description="librdkafka consumer properties; override the derived ones"
    )
    producer_extra: dict[str, ClientValue] = Field(
        default_factory=dict, description="librdkafka producer properties; override the derived ones"
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _blank_is_unset(cls, v: str | None) -> str | None:
        v = v.strip() or None if v is not None else None
        for item in (v or "").split(","):
            if v is not None and not _BOOTSTRAP.fullmatch(item.strip()):
                raise ValueError(f"{item.strip()!r} is not host:port (port 1-65535)")
        return v

    @field_validator("worker_slot")
    @classmethod
    def _slot(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 0:
            raise ValueError("must be an integer >= 0, 'auto', 'ordinal' or 'random'")
        return v

    @field_validator("input_topics")
    @classmethod
    def _input_topics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError("input topics repeat")
        return tuple(_topic(t) for t in v)

    @field_validator("output_topic", "dlq_topic")
    @classmethod
    def _not_an_input(cls, v: str, info: ValidationInfo) -> str:
        if v in info.data.get("input_topics", ()):
            raise ValueError(f"{v!r} is also an input topic (a feedback loop)")
        if info.field_name == "dlq_topic" and v == info.data.get("output_topic"):
            raise ValueError(f"{v!r} is also the output topic")
        return _topic(v)

    @field_validator("sasl_mechanism")
    @classmethod
    def _sasl(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None and str(info.data.get("security_protocol", "")).startswith("SASL"):
            raise ValueError("required when security_protocol is SASL_PLAINTEXT or SASL_SSL")
        if v is not None and v not in SASL_MECHANISMS:
            raise ValueError(f"{v!r} is not a SASL mechanism librdkafka knows")
        return v


class DigestSettings(_Group):
    compaction: bool = Field(True, description="give the model each line template once (first line verbatim, "
                                               "the rest as a count and value ranges) instead of the raw document; "
                                               "generative mode only")
    min_saving: float = Field(0.2, ge=0.0, lt=1.0, description="compact only a document whose model text shrinks by "
                                                                 "at least this fraction of its tokens")
    highlights: int = Field(3, ge=0, le=64, description="input lines kept verbatim as the output's highlights")


class PipelineSettings(_Group):
    """Policy of the stages between the consumer and the producer (docs/pipeline.md)."""

    poll_batch: int = Field(256, ge=1, le=100_000, description="messages per poll, tokenized in one batch")
    preprocess_processes: int | None = Field(
        None, ge=0, le=64, description="worker processes for each poll batch's digest, highlights and compaction "
                                       "(0: on the ingest thread); unset: 0 below 8 cores, else cores // 4 (at most 8)",
    )
    pause_above_bins: float = Field(4.0, gt=0.0, description="pause the partitions when the packer holds more "
                                                             "than this many bins' budget of tokens; resume below half of it")
    pause_above_messages: int = Field(20_000, ge=1, description="pause when more messages are in flight; resume "
                                                                 "below half of it")
    max_document_bytes: int = Field(
        262_144, ge=4_096, le=1_000_000_000,
        description="the most text (UTF-8 bytes) tokenized in one call: a longer document is counted and chunked "
                    "in slices of whole lines of at most this size, never tokenized whole, and a poll batch is "
                    "tokenized in groups of at most this size (bounds a document's tokenizer memory)",
    )
    stall_timeout_s: float = Field(
        300.0, gt=0.0, le=86_400.0, description="a preprocessing batch, or documents on the model (in the engine "
                                                "process or in this one), with no result for this long: /readyz "
                                                "turns not ready at half of it, and the worker exits 1 at all of it "
                                                "(a stalled engine process is killed; nothing more is committed; a "
                                                "restart redoes the rest)",
    )


class WindowingSettings(_Group):
    """One-line records (syslog, log shippers) grouped into documents per partition and key (docs/windowing.md)."""

    enabled: bool = Field(False, description="read input records as lines of a stream and summarize windows of "
                                             "them; off: every record is a document")
    topics: tuple[str, ...] = Field((), description="input topics read as lines when enabled; empty: all of them")
    key_field: str | None = Field(None, description="dotted path of the key in a JSON record (e.g. host, "
                                                    "resource.service.name); unset: key_regex, else the Kafka key")
    key_regex: str | None = Field(None, description="regular expression over the line whose first group (or group "
                                                    "'key') is the key, e.g. a syslog host")
    gap_s: float = Field(10.0, gt=0.0, le=86_400.0, description="a key's window closes after this long without a "
                                                               "record while reading (session gap; time with the "
                                                               "partitions paused by backpressure does not count)")
    max_length_s: float = Field(60.0, gt=0.0, le=86_400.0, description="a window closes this long after it opened")
    max_lines: int = Field(2_000, ge=1, le=1_000_000, description="a window closes at this many records")
    max_bytes: int = Field(262_144, ge=64, le=64 << 20, description="a window closes at this many bytes of text")
    max_held_bytes: int = Field(268_435_456, ge=1_024, description="text held in open windows at most: at it, "
                                                                  "the oldest windows close (closed_by max_held)")
    multiline: bool = Field(True, description="join continuation lines (stack frames, Caused by:, goroutine dumps) "
                                              "to their first line")
    time: Literal["poll", "record", "event"] = Field(
        "poll", description="the clock of gap_s and max_length_s: poll (the worker's, as records are read), record "
                            "(the Kafka record timestamps) or event (the record's own time field, else its line's "
                            "timestamp, else the Kafka timestamp); a partition's windows all close when its committed offset "
                            "has been held for max_length_s on the worker's clock")
    grace_s: float = Field(5.0, ge=0.0, le=86_400.0, description="record/event time: how far behind the newest "
                           "time seen in its partition a record may be before it counts as late (late records "
                           "still join their key's window; docs/windowing.md)")

    @field_validator("topics")
    @classmethod
    def _topics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_topic(t) for t in v)

    @field_validator("key_regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return v


class RedactionSettings(_Group):
    """Secrets out of what the worker publishes (worker/redaction/, docs/digest.md)."""

    enabled: bool = Field(True, description="replace credentials' values with <redacted:kind> before the digest "
                                            "and the model, in spans and in log lines")
    extra_patterns: dict[str, str] = Field(
        {}, description="more secrets: kind -> regular expression (group 1, else the match, is replaced)",
        json_schema_extra=_allowed("kind names of a-z 0-9 _; Python regular expressions"))
    allowed_keys: tuple[str, ...] = Field((), description="key names (any case) whose values the key=value rule "
                                                         "leaves alone, e.g. token_type")
    dead_letters: bool = Field(False, description="redact dead letters' values too (replay then sends redacted "
                                                  "text); off: they keep the original bytes, restrict the "
                                                  "dead-letter topic by ACL")

    @field_validator("extra_patterns")
    @classmethod
    def _patterns(cls, v: dict[str, str]) -> dict[str, str]:
        for kind, rx in v.items():
            if not re.fullmatch(r"[a-z0-9_]{1,40}", kind):
                raise ValueError(f"kind {kind!r} is not 1-40 of a-z 0-9 _")
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"{kind}: not a regular expression: {exc}") from None
        return v


class ServerSettings(_Group):
    host: str = Field("127.0.0.1", min_length=1,
                      description="metrics/health bind address; 0.0.0.0 to be scraped from outside (containers)")
    port: int = Field(9464, ge=0, le=65_535, description="metrics/health port; 0 disables")
