"""OTLP logs export requests as documents: one export request, its log records as lines.

    is_export(obj)     -> a decoded JSON object is an OTLP/JSON ExportLogsServiceRequest (`resourceLogs`,
                          and neither `text` nor `lines`)
    from_proto(value)  -> the same object from binary protobuf bytes, or None when they are no logs export;
                          TooDeep when they nest deeper than protobuf reads
    read_export(obj)   -> Export(lines, services), or BadMessage: `invalid_otlp` naming the place and
                          why, `empty_text` when it holds no log record

The OpenTelemetry Collector's Kafka exporter writes one export request per record value, as JSON
(`encoding: otlp_json`) or protobuf (`otlp_proto`, its default); the decoder (models.py) reads both
into one document. Protobuf is read by opentelemetry-proto's generated classes and turned into the
OTLP/JSON shape by protobuf's own JSON mapping, so both encodings take the same path from there.
The digest reads a `{"text": ...}` document holding such JSON the same way (digest/structured.py).

Each record is one line, `<time> <LEVEL> [<service>] <body> key=value ...`: time from
`timeUnixNano` (else `observedTimeUnixNano`) as RFC 3339 UTC with milliseconds, `-` when none;
LEVEL the name of `severityNumber`'s range (TRACE, DEBUG, INFO, WARN, ERROR, FATAL), else
`severityText` (one word), else `UNSET`; service the resource's `service.name` (else `host.name`,
else `-`); the body's value; then the record's attributes (line breaks in any value written as spaces:
a record is one line).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from worker.errors import RibbonError
from worker.messages.levels import from_otlp

MAX_SERVICES_IN_SOURCE = 3


class InvalidExport(RibbonError, ValueError):
    """An OTLP export whose structure is wrong: the message names the place (`resourceLogs.0.scopeLogs`)."""


class TooDeep(RibbonError, ValueError):
    """A protobuf export nested deeper than the decoder reads (a `schema` dead letter, like deep JSON)."""


# protobuf (upb) reads at most 100 levels of messages: with AnyValue → KeyValueList → KeyValue, a body
# or attribute nested about 32 levels deep. Its DecodeError names the limit: "...MaxDepth".
_DEPTH_WORDS = ("depth", "nest", "recursion")


@dataclass(frozen=True)
class Export:
    lines: list[str]          # one per log record, in the export's order
    services: list[str]       # the resources' service.name values, distinct, in order of appearance

    @property
    def source(self) -> str | None:
        """The services as a document's `source` (the first few, then how many more)."""
        s = self.services
        if not s:
            return None
        more = len(s) - MAX_SERVICES_IN_SOURCE
        return ",".join(s[:MAX_SERVICES_IN_SOURCE]) + (f" +{more} more" if more > 0 else "")


def is_export(obj: Any) -> bool:
    return (isinstance(obj, dict) and "resourceLogs" in obj and obj.get("text") is None
            and obj.get("lines") is None)


def from_proto(value: bytes) -> dict | None:
    """A protobuf ExportLogsServiceRequest as its OTLP/JSON object, or None when the bytes do not parse as
    one holding at least one log record with a time or a body (random bytes can parse as an empty one)."""
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415 protobuf and the OTLP classes (~40 ms) load only when a value looks like a protobuf export
    from google.protobuf.message import DecodeError  # noqa: PLC0415 protobuf and the OTLP classes (~40 ms) load only when a value looks like a protobuf export
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: PLC0415 protobuf and the OTLP classes (~40 ms) load only when a value looks like a protobuf export

    msg = ExportLogsServiceRequest()
    try:
        msg.ParseFromString(value)
    except RecursionError:
        raise TooDeep("an OTLP logs export (otlp_proto) nests deeper than the protobuf decoder reads") from None
    except DecodeError as exc:
        if any(w in str(exc).lower() for w in _DEPTH_WORDS):
            raise TooDeep("an OTLP logs export (otlp_proto) nests deeper than the protobuf decoder reads "
                          "(100 levels of messages: about 32 levels of nested values)") from None
        return None
    if not any(rec.time_unix_nano or rec.observed_time_unix_nano or rec.HasField("body")
               for rl in msg.resource_logs for sl in rl.scope_logs for rec in sl.log_records):
        return None
    return MessageToDict(msg, use_integers_for_enums=True)


def read_export(obj: dict) -> Export:
    """The records of an OTLP/JSON logs export as lines; InvalidExport naming the place when its structure is wrong."""
    lines: list[str] = []
    services: dict[str, None] = {}  # distinct, in order of appearance: a dict, so each lookup is O(1)
    for i, rl in enumerate(_array(obj, "resourceLogs", "resourceLogs")):
        where = f"resourceLogs.{i}"
        _object(rl, where)
        resource = rl.get("resource") or {}
        _object(resource, f"{where}.resource")
        res = _attributes(resource.get("attributes"), f"{where}.resource.attributes")
        service = res.get("service.name") or res.get("host.name") or "-"
        if service != "-":
            services.setdefault(service)
        key = "scopeLogs" if "scopeLogs" in rl else "instrumentationLibraryLogs"
        for j, sl in enumerate(_array(rl, key, f"{where}.{key}")):
            _object(sl, f"{where}.{key}.{j}")
            for k, rec in enumerate(_array(sl, "logRecords", f"{where}.{key}.{j}.logRecords")):
                lines.append(_line(rec, service, f"{where}.{key}.{j}.logRecords.{k}"))
    return Export(lines, list(services))


def _line(rec: Any, service: str, where: str) -> str:
    _object(rec, where)
    attrs = _attributes(rec.get("attributes"), f"{where}.attributes")
    extra = " ".join(f"{k}={v}" for k, v in attrs.items())
    body = _any_value(rec.get("body"), f"{where}.body")
    line = f"{_time(rec)} {_level(rec, where)} [{service}] {body}" + (f" {extra}" if extra else "")
    return line.replace("\r", " ").replace("\n", " ")     # a record is one line, whatever its values hold


def _level(rec: dict, where: str) -> str:
    number = rec.get("severityNumber")
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise InvalidExport(f"{where}.severityNumber: {str(number)[:40]!r} is not an integer")
    if number and 1 <= number <= 24:
        return from_otlp(number)
    text = rec.get("severityText")
    if isinstance(text, str) and text.strip() and len(text.split()) == 1:
        return text.strip()
    return "UNSET"


def _array(parent: dict, key: str, where: str) -> list:
    v = parent.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InvalidExport(f"{where}: a JSON {type(v).__name__}, not an array")
    return v


def _object(v: Any, where: str) -> None:
    if not isinstance(v, dict):
        raise InvalidExport(f"{where}: a JSON {type(v).__name__}, not an object")


def _any_value(v: Any, where: str) -> str:
    """An AnyValue as text (nested arrays and key-value lists flattened, iteratively: no recursion);
    InvalidExport naming the place when an array or key-value list is not the shape OTLP gives it."""
    out: list[str] = []
    stack: list[Any] = [(v, where)]
    while stack:
        x = stack.pop()
        if isinstance(x, str):                       # a separator pushed below
            out.append(x)
            continue
        x, at = x
        if not isinstance(x, dict):
            out.append("" if x is None else str(x))
        elif "arrayValue" in x or "kvlistValue" in x:
            kv = "kvlistValue" in x
            name = "kvlistValue" if kv else "arrayValue"
            holder = x[name] if x[name] is not None else {}
            _object(holder, f"{at}.{name}")
            items = _array(holder, "values", f"{at}.{name}.values")
            parts: list[Any] = []
            for n, item in enumerate(items):
                parts.append("," if n else "")
                if kv:
                    _object(item, f"{at}.{name}.values.{n}")
                    parts += [f"{item.get('key')}=", (item.get("value"), f"{at}.{name}.values.{n}.value")]
                else:
                    parts.append((item, f"{at}.{name}.values.{n}"))
            stack.extend(reversed(parts))
        else:
            out.append(next((str(x[k]) for k in ("stringValue", "intValue", "doubleValue", "boolValue",
                                                  "bytesValue") if k in x), ""))
    return "".join(out)


def _attributes(items: Any, where: str) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise InvalidExport(f"{where}: a JSON {type(items).__name__}, not an array")
    return {str(a.get("key", "")): _any_value(a.get("value"), f"{where}.{n}.value")
            for n, a in enumerate(items) if isinstance(a, dict)}


def _time(rec: dict) -> str:
    nanos = rec.get("timeUnixNano") or rec.get("observedTimeUnixNano")
    try:
        ns = int(nanos)
    except (TypeError, ValueError):
        return "-"
    if ns <= 0:
        return "-"
    try:
        dt = datetime.fromtimestamp(ns // 1000 / 1e6, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "-"
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
