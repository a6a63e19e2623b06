"""Log shippers' JSON records (Vector, Fluent Bit, journald, an OTLP log record) read as one line each.

    read_record(obj)             -> Record(line, source, time_ms, level, shape), or None when `obj` holds no line;
                                    Record.text is the line as a document holds it (with a header when the
                                    record has a level field)
    document_fields(obj, record) -> the input fields of a one-line document made of it (models.py)
    iso_ms(ms)                   -> milliseconds since the epoch as ISO 8601 UTC

A shipper writes one JSON object per log line to Kafka, with the line under its own field name and
the host, pod or resource beside it. The same reading serves the document decoder (models.py: such
a record is a one-line document) and the windowing hook (worker/pipeline/lines.py: the line of a
window, its key and its event time). The fields are read in the order below; the first one holding
a value of the right type wins (docs/messages.md lists them per shipper, with a sample each).

- line: `message` (Vector), `log` (Fluent Bit), `msg`, `MESSAGE` (journald), `body` (an OTLP log
  record: a string, or an AnyValue `{"stringValue": ...}`);
- source: `host`, `hostname`, `_HOSTNAME`, `kubernetes.pod_name` (with `/container_name` when given),
  the resource's `host.name`, `k8s.pod.name` or `service.name` (`resource.attributes` as an object or
  as OTLP key-value pairs; Vector's `resources` object);
- time: `timestamp`, `@timestamp`, `time`, `date`, `ts` (RFC 3339 text, or seconds since the epoch as
  a number), journald's `__REALTIME_TIMESTAMP` / `_SOURCE_REALTIME_TIMESTAMP` (microseconds), OTLP's
  `timeUnixNano` / `observedTimeUnixNano` (nanoseconds);
- level: `level`, `severity`, `severityText`, `severity_text`, journald's `PRIORITY` (0-7, a syslog
  severity, given as its normalized level: worker/messages/levels.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from worker.messages.levels import from_pri

LINE_FIELDS = ("message", "log", "msg", "MESSAGE", "body")
HOST_FIELDS = ("host", "hostname", "_HOSTNAME")
RESOURCE_SOURCE_KEYS = ("host.name", "k8s.pod.name", "service.name")
TEXT_TIME_FIELDS = ("timestamp", "@timestamp", "time", "date", "ts")
MICRO_TIME_FIELDS = ("_SOURCE_REALTIME_TIMESTAMP", "__REALTIME_TIMESTAMP")
NANO_TIME_FIELDS = ("timeUnixNano", "observedTimeUnixNano")
LEVEL_FIELDS = ("level", "severity", "severityText", "severity_text")
_FRACTION = re.compile(r"(\.\d{6})\d+")   # Python reads at most microseconds
_EPOCH_S_MAX = 1e11                        # a larger number is milliseconds, not seconds


@dataclass(frozen=True)
class Record:
    line: str
    source: str | None = None
    time_ms: int | None = None     # the record's own time, milliseconds since the epoch (UTC)
    level: str | None = None
    shape: str = "json"            # vector | fluent-bit | journald | otlp | json: which fields were read

    @property
    def text(self) -> str:
        """The line as a document holds it. A record with a level field (journald's PRIORITY, an OTLP
        severity, a parsed `level`) carries its header in fields, not in its message: it is written as an
        OTLP record's line is (otlp.py), `<time> <LEVEL> [<source>] <message>`, so the digest reads its time
        and level; a record without one is its message verbatim (a raw line keeps its own header)."""
        if self.level is None:
            return self.line
        return f"{iso_ms(self.time_ms) or '-'} {self.level.split()[0].upper()} [{self.source or '-'}] {self.line}"


def read_record(obj: dict[str, Any]) -> Record | None:
    """The shipper record's line, source, time and level; None when none of LINE_FIELDS holds a line."""
    field, line = _line(obj)
    if line is None:
        return None
    return Record(line=line, source=_source(obj), time_ms=_time_ms(obj), level=_level(obj),
                  shape=_shape(obj, field))


def document_fields(obj: dict[str, Any], record: Record) -> dict:
    """A shipper's one-line record (worker/messages/shippers.py) as a document's fields: its own `id`,
    `source`, `kind` and `attributes` where it has them; the shipper's host as `source`; its time, level
    and shape added to `attributes` (under `time`, `level`, `shipper`, unless the record has those)."""
    own = obj.get("attributes")
    attributes = dict(own) if isinstance(own, dict) else {}
    extra = {"shipper": record.shape, "time": iso_ms(record.time_ms), "level": record.level}
    for k, v in extra.items():
        if v is not None:
            attributes.setdefault(k, v)
    source = obj.get("source") if isinstance(obj.get("source"), str) else record.source
    return {"text": record.text, "id": obj.get("id"), "source": source,
            "kind": obj.get("kind") if obj.get("kind") is not None else "log", "attributes": attributes}


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 UTC with milliseconds (`2024-05-01T12:00:00.000Z`)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1e3, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line(obj: dict[str, Any]) -> tuple[str, str | None]:
    for f in LINE_FIELDS:
        v = obj.get(f)
        if isinstance(v, dict):   # an OTLP AnyValue
            v = v.get("stringValue")
        if isinstance(v, str):
            return f, v
    return "", None


def _source(obj: dict[str, Any]) -> str | None:
    for f in HOST_FIELDS:
        v = obj.get(f)
        if isinstance(v, str) and v.strip():
            return v
    k8s = obj.get("kubernetes")
    if isinstance(k8s, dict) and isinstance(k8s.get("pod_name"), str):
        container = k8s.get("container_name")
        return k8s["pod_name"] + (f"/{container}" if isinstance(container, str) and container else "")
    resource = obj.get("resource")
    attrs = resource.get("attributes") if isinstance(resource, dict) else obj.get("resources")
    found = _attributes(attrs)
    return next((found[k] for k in RESOURCE_SOURCE_KEYS if k in found), None)


def _attributes(attrs: Any) -> dict[str, str]:
    """Resource attributes as a flat object, or as OTLP key-value pairs: their string values."""
    if isinstance(attrs, dict):
        return {k: v for k, v in attrs.items() if isinstance(v, str)}
    out: dict[str, str] = {}
    for kv in attrs if isinstance(attrs, list) else ():
        if isinstance(kv, dict) and isinstance(kv.get("key"), str) and isinstance(kv.get("value"), dict):
            v = kv["value"].get("stringValue")
            if isinstance(v, str):
                out[kv["key"]] = v
    return out


def _time_ms(obj: dict[str, Any]) -> int | None:
    for fields, scale in ((NANO_TIME_FIELDS, 1e-6), (MICRO_TIME_FIELDS, 1e-3)):
        for f in fields:
            v = obj.get(f)
            if isinstance(v, str) and v.isdigit():
                v = int(v)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return _in_range(int(v * scale))
    for f in TEXT_TIME_FIELDS:
        ms = parse_time(obj.get(f))
        if ms is not None:
            return ms
    return None


MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last time ISO 8601 text (and datetime) can hold


def _in_range(ms: int) -> int | None:  # integers: no float overflow
    """`ms` when a datetime can hold it, else None (a nonsense time field is no time, not a broken record)."""
    return ms if 0 < ms <= MAX_MS else None


def parse_time(v: Any) -> int | None:
    """RFC 3339 text or seconds (milliseconds when that large) since the epoch -> ms since the epoch."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        ms = v if v > _EPOCH_S_MAX else v * 1e3
        return int(ms) if 0 < ms <= MAX_MS else None
    if not isinstance(v, str) or len(v) < 10 or not v[:4].isdigit():
        return None
    text = _FRACTION.sub(r"\1", v.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1e3)


def _level(obj: dict[str, Any]) -> str | None:
    for f in LEVEL_FIELDS:
        v = obj.get(f)
        if isinstance(v, str) and v.strip():
            return v.strip()
    p = obj.get("PRIORITY")
    if isinstance(p, str) and p.isdigit() and int(p) < 8:  # a syslog severity (0-7)
        return from_pri(p)
    return None


def _shape(obj: dict[str, Any], field: str) -> str:
    if field == "MESSAGE" or "_HOSTNAME" in obj or "__REALTIME_TIMESTAMP" in obj:
        return "journald"
    if field == "body" or "timeUnixNano" in obj or "resource" in obj:
        return "otlp"
    if field == "log":
        return "fluent-bit"
    if field == "message":
        return "vector"
    return "json"
