"""Typed, frozen, validated settings (DESIGN.md section 3).

Precedence: CLI flag > environment (RIBBON_ prefix, nested with __) >
config/ribbon.toml (or --config PATH) > the defaults below.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ClientValue = Union[str, int, float, bool]


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Group):
    bootstrap_servers: str | None = Field(
        None, description="host:port[,host:port]; unset starts the embedded broker (demo, tests)"
    )
    input_topics: tuple[str, ...] = Field(("ribbon.input",), min_length=1)
    output_topic: str = Field("ribbon.summaries", min_length=1)
    dlq_topic: str = Field("ribbon.dlq", min_length=1)
    group_id: str = Field("ribbon", min_length=1)
    delivery: Literal["exactly_once", "at_least_once"] = "exactly_once"
    transactional_id_prefix: str = Field("ribbon", min_length=1)
    worker_slot: int = Field(0, ge=0, description="stable per-worker index: transactional.id suffix")
    group_instance_id: str | None = Field(None, description="static membership id (optional)")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    session_timeout_ms: int = Field(45_000, ge=1_000)
    max_poll_interval_ms: int = Field(300_000, ge=10_000)
    max_message_bytes: int = Field(4_000_000, ge=1)
    consumer_extra: dict[str, ClientValue] = Field(default_factory=dict)
    producer_extra: dict[str, ClientValue] = Field(default_factory=dict)


class PackerSettings(_Group):
    token_budget: int | Literal["auto"] = Field("auto", description="tokens per bin, or auto (Phase-0 autotune)")
    max_seqs_per_bin: int = Field(256, ge=1, le=65_536)
    reserve_per_seq: int | None = Field(None, ge=0, description="tokens reserved per document for generation; default max_new_tokens")
    efficient_tokens: int = Field(8_192, ge=1, description="a bin this full is worth sending at once")
    max_wait_ms: float = Field(50.0, ge=0.0, description="longest a bin waits to fill")
    latency_target_ms: float = Field(2_000.0, gt=0.0, description="per-message latency target")
    alignment: int = Field(16, ge=1, le=4_096, description="ribbon length is padded to a multiple of this")
    slots: int = Field(3, ge=2, le=64, description="pinned bin buffers in the ring")


class ModelSettings(_Group):
    path: str = Field("tiny-random", description="local path or hub id of a causal LM (or encoder in extractive mode)")
    mode: Literal["generative", "extractive"] = "generative"
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    device: str = Field("auto", description="auto, cpu, cuda, cuda:N")
    attention: Literal["auto", "flash_attn", "varlen", "reference"] = "auto"
    max_new_tokens: int = Field(128, ge=1, le=8_192)
    temperature: float = Field(0.0, ge=0.0, le=10.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int = Field(0, description="base seed; each document's seed derives from its id")
    stop_strings: tuple[str, ...] = ()
    instruction: str = Field(
        "Summarize the following telemetry for an on-call engineer. Name the failing element, the error and its likely cause.",
        min_length=1,
    )
    use_chat_template: bool = True
    max_input_tokens: int | None = Field(None, ge=16, description="longer documents are chunked (or cut if truncate)")
    truncate: bool = Field(False, description="cut overlong documents instead of chunking them")
    highlights: int = Field(3, ge=0, le=64, description="input lines kept as highlights")
    cuda_graphs: bool = True
    local_files_only: bool = True


class ServerSettings(_Group):
    host: str = "0.0.0.0"
    port: int = Field(9464, ge=0, le=65_535, description="metrics/health port; 0 disables")


class Settings(_Group):
    kafka: KafkaSettings = KafkaSettings()
    packer: PackerSettings = PackerSettings()
    model: ModelSettings = ModelSettings()
    server: ServerSettings = ServerSettings()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    drain_timeout_s: float = Field(30.0, ge=0.0)
