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
    first_time: str | None = Field(None, description="failures: the earliest time of its failure lines (ISO 8601)")
    last_time: str | None = Field(None, description="failures: the latest time of its failure lines")


class TimeSpan(_Out):
    first: str = Field(description="the earliest time, ISO 8601 (yearless --MM-DDThh:mm:ss when the log gives no year)")
    last: str = Field(description="the latest time (never before first)")
    form: str = Field(description="iso8601 | rfc3164 | yearless | yearless_month | ctime | day_month | month_day | "
                                  "day_first | month_first | yy/MM/dd | compact | yyyyMMdd | apache | epoch_s | epoch_ms")
    seconds: float = Field(ge=0.0, description="last minus first")
    zone: str | None = Field(None, description="UTC when the log's times carry a zone (converted), else None")
    out_of_order: int = Field(0, ge=0, description="timestamped lines earlier than the timestamped line before them")
    first_line: int | None = Field(None, ge=1, description="the line of the earliest time (1-based)")
    last_line: int | None = Field(None, ge=1, description="the line of the latest time")


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
    failures_by_level: dict[str, int] = Field(default_factory=dict, description="the failures left out, by level")


class CounterStat(_Out):
    name: str
    total: float
    objects: int = Field(ge=0, description="objects where it is non-zero")
    max: float
    max_object: str = Field(description="the object of its largest value")
    median: float


class PmDigest(_Out):
    standard: str = Field(description="32.435 (measCollecFile) | 28.532 (measDataFile)")
    managed_element: str | None = None
    sender: str | None = None
    begin: str | None = None
    end: str | None = None
    granularity_s: int | None = None
    objects: int = Field(ge=0, description="distinct measured objects")
    cells: int = Field(ge=0, description="objects that name a cell")
    counters: int = Field(ge=0, description="distinct counters")
    nonzero: list[CounterStat] = Field(default_factory=list, description="non-zero counters, largest total first "
                                                                          "(the first 10)")
    nonzero_total: int = Field(0, ge=0, description="how many counters are non-zero (all of them)")
    failure_counters: list[CounterStat] = Field(default_factory=list, description="*Fail*, *Drop*, *Rej* counters")
    extremes: list[dict[str, str | float]] = Field(default_factory=list,
                                                  description="objects far from the others on a counter")
    suspect: int = Field(0, ge=0, description="values marked suspect")


class Digest(_Out):
    lines: int = Field(ge=0, description="non-blank lines")
    templates_total: int = Field(ge=0, description="line templates in the document")
    span: TimeSpan | None = None
    severity: dict[str, int] = Field(default_factory=dict, description="lines by level")
    templates: list[TemplateSummary] = Field(default_factory=list, description="commonest templates")
    failures: list[TemplateSummary] = Field(default_factory=list,
                                            description="templates of WARN-or-worse lines, ranked by incident "
                                                        "weight (lines x level x novelty), then time")
    entities: list[Entity] = Field(default_factory=list)
    outliers: list[Outlier] = Field(default_factory=list)
    omitted: Omitted = Field(default_factory=Omitted, description="how many were left out of each capped list")
    format: str | None = Field(None, description="the header format recognised (worker/digest/formats.py), or None")
    cleaned_lines: int = Field(0, ge=0, description="lines whose escape sequences or control bytes were removed")
    pm: PmDigest | None = Field(None, description="a 3GPP PM file's counter digest")
