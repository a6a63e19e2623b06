"""The `digest` object of an output message (schema_version 2 and later). Pydantic only: imported by models.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_serialization_defaults_required=True)


class ValueCount(_Out):
    value: str
    count: int = Field(ge=1)


class VariableSummary(_Out):
    name: str = Field(description="key of key=value, the word before the value, or v<position>")
    kind: str = Field(description="number | hex | ip | uuid | time | quoted | other | merged")
    distinct: int = Field(ge=0, description="distinct values (a lower bound when distinct_capped)")
    distinct_capped: bool = False
    min: float | None = Field(None, description="numbers only")
    median: float | None = None
    max: float | None = None
    top: list[ValueCount] = Field(default_factory=list, description="commonest values")


class TemplateSummary(_Out):
    pattern: str = Field(description="the line with variable fields masked: <n> <hex> <ip> <uuid> <ts> <q> <*>")
    count: int = Field(ge=1)
    first_line: int = Field(ge=1, description="1-based")
    last_line: int = Field(ge=1)
    example: str = Field(description="its first line, verbatim")
    level: str | None = Field(None, description="FATAL | CRITICAL | ERROR | WARN | NOTICE | INFO | DEBUG | TRACE")
    variables: list[VariableSummary] = Field(default_factory=list)


class TimeSpan(_Out):
    first: str = Field(description="ISO 8601 (yearless --MM-DDThh:mm:ss for RFC 3164 syslog)")
    last: str
    form: str = Field(description="iso8601 | rfc3164 | apache | epoch_s | epoch_ms | compact")
    seconds: float = Field(ge=0.0, description="last minus first (0 when they are out of order)")


class Entity(_Out):
    kind: str = Field(description="element | host | ip | cell | cause")
    value: str
    count: int = Field(ge=1)


class Outlier(_Out):
    line: int = Field(ge=1, description="1-based")
    name: str = Field(description="the variable")
    value: float
    others_min: float
    others_max: float
    z: float = Field(description="robust z-score among the variable's values")
    text: str = Field(description="the line, verbatim")


class Omitted(_Out):
    templates: int = Field(0, ge=0)
    failures: int = Field(0, ge=0)
    entities: int = Field(0, ge=0)
    outliers: int = Field(0, ge=0)


class Digest(_Out):
    lines: int = Field(ge=0, description="non-blank lines")
    templates_total: int = Field(ge=0, description="line templates in the document")
    span: TimeSpan | None = None
    severity: dict[str, int] = Field(default_factory=dict, description="lines by level")
    templates: list[TemplateSummary] = Field(default_factory=list, description="commonest templates")
    failures: list[TemplateSummary] = Field(default_factory=list,
                                            description="templates of severe lines, in order of first appearance")
    entities: list[Entity] = Field(default_factory=list)
    outliers: list[Outlier] = Field(default_factory=list)
    omitted: Omitted = Field(default_factory=Omitted, description="how many were left out of each capped list")
