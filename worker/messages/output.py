"""The output message (schemas/output.json): a summary with where it came from, its digest, tokens and timings.

Written by finishing (worker/pipeline/outputs.py), encoded and decoded in worker/messages/models.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worker.messages.digest import Digest


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_serialization_defaults_required=True)


class InputCoordinates(_Out):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class TokenCounts(_Out):
    input: int = Field(ge=0, description="prompt tokens over all chunks")
    document: int = Field(0, ge=0, description="tokens of the raw document, before compaction (0 in digest mode, "
                                               "and for a window whose compacted prompt was kept on its bytes: "
                                               "not counted)")
    output: int = Field(ge=0, description="generated tokens over all passes")
    chunks: int = Field(ge=1, description="1 unless the document was longer than the budget")


class TimingMs(_Out):
    queued: float = Field(ge=0.0, description="poll to the start of its GPU bin")
    gpu: float = Field(ge=0.0, description="prefill and decode of its bins")
    total: float = Field(ge=0.0, description="poll to produce")
    ingest: float = Field(0.0, ge=0.0, description="poll to the packer: validation, digest, tokenization "
                          "(0 in digest mode)")
    model_done: float = Field(0.0, ge=0.0, description="poll to the end of its last bin (0 in digest mode)")


class GroundingReport(_Out):
    checked: int = Field(ge=0, description="identifiers in the model's summary that were looked up")
    unsupported: list[str] = Field(default_factory=list, description="identifiers found in neither the document "
                                   "nor its digest (their sentences were dropped or marked, per generation.grounding)")
    dropped_sentences: int = Field(0, ge=0, description="sentences dropped for holding one")
    fallback: bool = Field(False, description="no sentence was left: the summary is the digest in plain English")


class Summary(_Out):
    text: str = Field(description="what an operator reads: the model's text when it passed the publish gate, "
                                  "else the digest in plain English")
    source: Literal["model", "digest"] = Field(description="which of the two `text` is")
    reason: Literal["passed", "digest_mode", "loop", "grounded", "copy", "content", "fact"] = Field(
        description="passed (the model's text passed every check of the publish gate); digest_mode (no model "
                    "ran); else the gate's first failed check: loop (a run of tokens repeated), grounded (every "
                    "sentence cited what the input does not hold), copy (a near-verbatim copy of one input "
                    "line), content (too few content words), fact (named no failure, value or entity of the "
                    "digest)")


class SourceOffsets(_Out):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    first: int = Field(ge=0, description="the window's first record")
    last: int = Field(ge=0, description="its last record (records of other keys lie between)")


class WindowInfo(_Out):
    """Where a document made of a window of one-line records came from (null for a record-per-document input)."""

    key: str = Field(description="the window's key (Kafka key, record field or line pattern; empty: none)")
    start: str | None = Field(description="the earliest record timestamp, ISO 8601 UTC (null: none known)")
    end: str | None = Field(description="the latest record timestamp, ISO 8601 UTC")
    records: int = Field(ge=1, description="records in the window (its offsets within the ranges, of this key)")
    events: int = Field(ge=1, description="events after multiline joins")
    closed_by: Literal["gap", "max_length", "max_lines", "max_bytes", "max_open", "max_held", "flush"]
    clock: Literal["poll", "record", "event"] = Field("poll", description="the clock its gap and length ran on "
                                                      "(windowing.time): start/end are the records' times either way")
    late: int = Field(0, ge=0, description="records older than their partition's watermark (record/event time)")
    read_start: str | None = Field(None, description="the worker's clock when its first record was read, ISO 8601 UTC")
    read_end: str | None = Field(None, description="the worker's clock when its latest record was read")
    offsets: list[SourceOffsets] = Field(min_length=1, description="source offset range per partition")


class OutputMessage(_Out):
    """A summary. Kafka key: the input key, or `id` when the input had none."""

    # `window` is written only for windows of line records: a document's output is as before it existed.
    model_config = ConfigDict(title="Ribbon output message",
                              json_schema_extra=lambda schema: schema["required"].remove("window"))

    id: str = Field(min_length=1, description="the input id, or topic:partition:offset")
    source: str | None = Field(None, description="as given")
    kind: str | None = Field(None, description="as given")
    attributes: dict[str, Any] | None = Field(None, description="as given")
    input: InputCoordinates
    summary: Summary = Field(description="the published summary, which of model and digest it is, and why")
    highlights: list[str] = Field(default_factory=list, description="input lines that matter most")
    digest: Digest = Field(description="line count, time span, severities, top templates, entities, outliers")
    mode: Literal["generative", "digest"]
    model: str = Field(min_length=1, description="model name or path")
    tokens: TokenCounts
    truncated: bool = Field(False, description="true only if truncation was configured and applied")
    timing_ms: TimingMs
    grounding: GroundingReport | None = Field(None, description="the grounding check of the model's summary "
                                              "(null in digest mode)")
    window: WindowInfo | None = Field(None, description="where a window of one-line records came from; absent "
                                                        "for a document")
    redactions: dict[str, int] = Field(default_factory=dict, description="secrets replaced with <redacted:kind> "
                                       "before the digest and the model, counted by kind (never the values)")
    schema_version: Literal[5] = 5
