"""The settings' groups (kafka, packer, model, digest, pipeline, windowing, redaction, server, tracing): typed,
frozen, validated; the root and its loading are in worker/config/settings.py (DESIGN.md section 3)."""

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
    transactional_id_prefix: str = Field("ribbon", min_length=1, description="transactional.id = prefix-group-slot")
    worker_slot: int | Literal["auto", "ordinal", "random"] = Field(
        0, description="transactional.id suffix: a stable index, or auto (host name), ordinal (StatefulSet), "
                       "random (Apache Kafka only); see docs/operating.md",
        json_schema_extra=_allowed("integer >= 0 | 'auto' | 'ordinal' | 'random'"),
    )
    group_instance_id: str | None = Field(None, description="static membership id (optional)")
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
    ssl_endpoint_identification: Literal["https", "none"] | None = Field(
        None, description="check the broker's host name against its certificate (librdkafka default: https)"
    )
    session_timeout_ms: int = Field(45_000, ge=1_000, description="consumer session.timeout.ms")
    max_poll_interval_ms: int = Field(300_000, ge=10_000, description="consumer max.poll.interval.ms")
    fetch_wait_max_ms: int = Field(
        500, ge=1, le=30_000,
        description="consumer fetch.wait.max.ms: the longest the broker holds a fetch that found no data. Apache "
                    "Kafka answers as soon as data arrives; a broker that does not (the embedded one waits the "
                    "whole time) adds up to this to every document's latency, so the embedded broker gets 20",
    )
    max_message_bytes: int = Field(
        4_000_000, ge=1_000, le=1_000_000_000, description="larger input goes to the dead-letter topic"
    )
    dead_letter_spill_bytes: int = Field(
        65_536, ge=0,
        description="dead-letter values this large wait for their commit in a temporary file, not in memory; "
                    "0 keeps them in memory",
    )
    hold_warning_s: float = Field(
        120.0, gt=0.0,
        description="an input unfinished this long holds its partition's commits: logged once with its "
                    "topic/partition/offset and counted in ribbon_held_partition_seconds",
    )
    txn_call_timeout_s: float = Field(
        10.0, gt=0.0, le=600.0,
        description="each transactional call (and an at-least-once flush) waits this long at most, then is "
                    "retried or aborted",
    )
    delivery_stuck_s: float = Field(
        120.0, gt=0.0, le=3_600.0,
        description="a delivery step unfinished after half of this turns /healthz red; a transaction that "
                    "cannot commit or abort within it stops the worker (exit 1) for a restart",
    )
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "zstd", description="the worker producer's compression.type for outputs and dead letters; zstd: about "
                            "twice lz4's ratio on outputs for about 1.5 times its (small) CPU "
                            "(bench/results/output_compression_cpu.json); brokers and consumers need zstd support "
                            "(Kafka 2.1+)",
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


class PackerSettings(_Group):
    token_budget: int | Literal["auto"] = Field(
        "auto", description="tokens per bin, or auto (Phase-0 autotune)",
        json_schema_extra=_allowed("'auto' | integer >= 16"),
    )
    max_seqs_per_bin: int = Field(256, ge=1, le=65_536, description="documents per bin at most")
    reserve_per_seq: int | None = Field(
        None, ge=0, description="tokens reserved per document for generation; default max_new_tokens"
    )
    efficient_tokens: int = Field(8_192, ge=1, description="a bin this full is worth sending at once")
    max_wait_ms: float = Field(50.0, ge=0.0, description="longest a bin waits to fill")
    latency_target_ms: float = Field(2_000.0, gt=0.0, description="per-message latency target")
    alignment: int = Field(16, ge=1, le=4_096, description="ribbon length is padded to a multiple of this")
    slots: int = Field(3, ge=2, le=64, description="pinned bin buffers in the ring")
    order: Literal["arrival", "decreasing"] = Field(
        "arrival", description="which documents a bin takes first: arrival (a prefix of the arrival order, then "
                               "the largest that fit: summaries publish as the model works; docs/pipeline.md) or "
                               "decreasing (each partition's oldest, then largest first: fullest bins)",
    )

    @field_validator("token_budget")
    @classmethod
    def _budget(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 16:
            raise ValueError("must be 'auto' or an integer >= 16")
        return v


class DigestSettings(_Group):
    compaction: bool = Field(True, description="give the model each line template once (first line verbatim, "
                                               "the rest as a count and value ranges) instead of the raw document; "
                                               "generative mode only")
    min_saving: float = Field(0.2, ge=0.0, lt=1.0, description="compact only a document whose model text shrinks by "
                                                                 "at least this fraction of its tokens")


class PipelineSettings(_Group):
    """Policy of the stages between the consumer and the producer (docs/pipeline.md)."""

    poll_batch: int = Field(256, ge=1, le=100_000, description="messages per poll, tokenized in one batch")
    preprocess_processes: int | None = Field(
        None, ge=0, le=64, description="worker processes for each poll batch's digest, highlights and compaction "
                                       "(0: on the ingest thread); unset: 0 below 8 cores, else cores // 4 (at most 8)",
    )
    pause_above_bins: float = Field(4.0, gt=0.0, description="pause the partitions when the packer holds more "
                                                             "than this many bins' budget of tokens")
    resume_below_bins: float = Field(2.0, gt=0.0, description="resume when it holds less than this many (below "
                                                              "pause_above_bins)")
    pause_above_messages: int = Field(20_000, ge=1, description="pause when more messages are in flight")
    resume_below_messages: int = Field(10_000, ge=1, description="resume when fewer are (below "
                                                                 "pause_above_messages)")
    finishing_queue_bins: int = Field(8, ge=1, le=1_024, description="finished bins waiting for the finishing "
                                                                     "thread before the GPU thread waits")
    delivery_interval_ms: float = Field(500.0, gt=0.0, le=60_000.0, description="longest delivery sleeps "
                                        "between steps when not woken (every completion wakes it: finishing once "
                                        "a bin, dead letters, revokes; a step between would commit part of a bin)")
    delivery_max_records: int = Field(2_000, ge=1, description="records per transaction (or produce batch) at most")
    lag_interval_s: float = Field(5.0, gt=0.0, description="how often consumer lag is exported")
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
    gc_freeze: bool = Field(True, description="at start, freeze what start-up built out of Python's garbage "
                            "collector's walks (shorter pauses for every thread; worker/observability/gcwatch.py)")
    switch_interval_ms: float = Field(
        5.0, gt=0.0, le=100.0, description="Python's thread switch interval in the worker (Python's default, 5 ms): "
                                           "how long the GPU thread may wait for the interpreter after a device sync "
                                           "while finishing and ingest run Python; 0.5 measured slower on the H200 "
                                           "(docs/pipeline.md)",
    )

    @field_validator("resume_below_bins", "resume_below_messages")
    @classmethod
    def _below(cls, v: float, info: ValidationInfo) -> float:
        high = info.data.get("pause_above_bins" if info.field_name == "resume_below_bins" else "pause_above_messages")
        if high is not None and v >= high:
            raise ValueError(f"must be below {info.field_name.replace('resume_below', 'pause_above')} ({high})")
        return v


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
    max_open_s: float = Field(60.0, gt=0.0, le=86_400.0, description="open windows hold their partition's "
                              "committed offset back at most this long: then all of that partition's windows close")
    max_windows: int = Field(10_000, ge=1, description="open windows at most: at it, the oldest windows "
                                                     "close (closed_by max_held)")
    max_held_bytes: int = Field(268_435_456, ge=1_024, description="text held in open windows at most: at it, "
                                                                  "the oldest windows close (closed_by max_held)")
    multiline: bool = Field(True, description="join continuation lines (stack frames, Caused by:, goroutine dumps) "
                                              "to their first line")
    time: Literal["poll", "record", "event"] = Field(
        "poll", description="the clock of gap_s and max_length_s: poll (the worker's, as records are read), record "
                            "(the Kafka record timestamps) or event (the record's own time field, else its line's "
                            "timestamp, else the Kafka timestamp); max_open_s always runs on the worker's clock")
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


class TracingSettings(_Group):
    """OpenTelemetry traces (worker/observability/tracing.py): off unless an endpoint is set here or in the
    standard OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT."""

    otlp_endpoint: str | None = Field(
        None, description="OTLP/HTTP collector base URL (spans go to <url>/v1/traces); unset: "
                          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT if set, else no tracing",
        json_schema_extra=_allowed("http(s)://host:port[/path]"),
    )
    service_name: str = Field("ribbon", min_length=1, description="the spans' service.name (OTEL_SERVICE_NAME "
                                                                   "wins when set)")
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0, description="fraction of documents traced when the input "
                                                                 "carries no sampling decision (parent-based)")

    @field_validator("otlp_endpoint")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", v):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v
