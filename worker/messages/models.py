"""Message models (DESIGN.md section 2) and input decoding.

Input values are a JSON object or plain UTF-8 text; docs/messages.md gives the
exact rules. Every bad input raises BadMessage, whose error_class is a short
stable code that the dead-letter path writes into the `error.class` header
(worker/kafka/headers.py owns the headers).
Unknown input fields are ignored (extra="ignore"), so producers can add fields
before workers know them; outputs forbid unknown fields.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from worker.errors import RibbonError
from worker.messages.jsonwalk import too_deep
from worker.messages.output import OutputMessage
from worker.messages.otlp import InvalidExport, TooDeep, from_proto, is_export, read_export
from worker.messages.shippers import document_fields, read_record

ERROR_CLASSES = (
    "null_value",     # no value at all (a tombstone)
    "oversize",       # more bytes than kafka.max_message_bytes
    "invalid_utf8",   # the bytes are not UTF-8
    "invalid_json",   # starts with "{" but is not valid JSON
    "not_an_object",  # valid JSON, but an array, number, true, false or null
    "schema",         # a JSON object with a field of the wrong type or value
    "missing_text",   # a JSON object with neither text nor lines
    "empty_text",     # the document is empty or only whitespace
    "invalid_otlp",   # an OTLP logs export (JSON `resourceLogs`, or protobuf) whose structure is wrong
)
KNOWN_KINDS = ("log", "trace", "pm", "crash", "syslog")
MAX_REASON_CHARS = 500
MAX_JSON_DEPTH = 64  # levels of nested objects/arrays in `attributes` and unknown fields (the output encoder stops at 254)
MAX_ATTRIBUTE_DEPTH = MAX_JSON_DEPTH
ORJSON_MAX_DEPTH = 1024  # levels orjson.loads reads at most
INT_RANGE = (-(2**63), 2**64 - 1)  # what JSON integers keep exactly: orjson makes larger ones floats
MAX_INT_DIGITS = 400  # longer integers are refused unread (a double ends near 309 digits)
_JSON_START = frozenset('["-0123456789tfn')  # what a JSON value other than an object starts with
PROTO_SNIFF_BYTES = 4096  # a UTF-8 value is tried as protobuf when it starts with 0x0A and holds 0x12 this early
_BIG_FLOAT = float(2**63)  # orjson parses an integer outside INT_RANGE as a float at least this large


class BadMessage(RibbonError):
    """An input that can never be summarized: it goes to the dead-letter topic, then is committed."""

    def __init__(self, error_class: str, message: str):
        self.error_class = error_class
        self.message = " ".join(message.split())[:MAX_REASON_CHARS]
        super().__init__(f"{error_class}: {self.message}")


def _nonblank(s: str) -> bool:
    return not s.isspace() and s != ""


class InputMessage(BaseModel):
    """A document to summarize: exactly one of `text` or `lines`, with something besides whitespace."""

    model_config = ConfigDict(
        extra="ignore", strict=True, frozen=True, title="Ribbon input message",
        json_schema_extra={
            "description": "Kafka record value: this JSON object, or plain UTF-8 text (then it is `text`). "
                           "Unknown fields are ignored. Exactly one of text or lines.",
            "oneOf": [
                {"required": ["text"], "properties": {"text": {"type": "string"}}},
                {"required": ["lines"], "properties": {"lines": {"type": "array"}}},
            ],
        },
    )

    text: str | None = Field(None, description="the document", json_schema_extra={"pattern": r"\S"})
    lines: list[str] | None = Field(
        None, description="the document as lines (joined with newlines)",
        json_schema_extra={"contains": {"type": "string", "pattern": r"\S"}},
    )
    id: str | None = Field(
        None, description="defaults to topic:partition:offset", json_schema_extra={"pattern": r"\S"}
    )
    source: str | None = Field(None, description="e.g. gnb-017/oam, amf-2/syslog")
    kind: str | None = Field(None, description="log | trace | pm | crash | syslog, or any other string",
                             examples=list(KNOWN_KINDS))
    attributes: dict[str, Any] | None = Field(None, description="passed through to the output")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not _nonblank(v):
            raise ValueError("id must not be empty or only whitespace")
        return v

    @model_validator(mode="after")
    def _one_document(self) -> InputMessage:
        if self.text is None and self.lines is None:
            raise PydanticCustomError("missing_text", "neither text nor lines is given")
        if self.text is not None and self.lines is not None:
            raise PydanticCustomError("schema", "give text or lines, not both")
        if self.text is not None and not _nonblank(self.text):
            raise PydanticCustomError("empty_text", "text is empty or only whitespace")
        if self.lines is not None and not any(_nonblank(line) for line in self.lines):
            raise PydanticCustomError("empty_text", "lines are empty or only whitespace")
        return self

    @property
    def document(self) -> str:
        return self.text if self.text is not None else "\n".join(self.lines or ())


def default_id(topic: str, partition: int, offset: int) -> str:
    return f"{topic}:{partition}:{offset}"


def _schema_error(exc: ValidationError) -> BadMessage:
    errors = exc.errors(include_url=False, include_input=False)
    for err in errors:
        if err["type"] in ("missing_text", "empty_text"):
            return BadMessage(err["type"], err["msg"])
    parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg'].removeprefix('Value error, ')}" for e in errors[:3]]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return BadMessage("schema", "; ".join(parts) + more)


def _validate(obj: dict[str, Any]) -> InputMessage:
    try:
        return InputMessage.model_validate(obj)
    except ValidationError as exc:
        raise _schema_error(exc) from None


def _check_attributes(msg: InputMessage, text: str) -> InputMessage:
    """`attributes` pass through unchanged or the message is a `schema` dead letter: nesting deeper than
    MAX_ATTRIBUTE_DEPTH, or an integer outside 64 bits (orjson would have made it a float), is refused.

    orjson turns such an integer into a float of magnitude 2**63 or more, so only attributes holding
    a float that large are parsed again with exact integers (rare), instead of searching every
    message's whole text for long digit runs (a fifth of the ingest thread's time in a profile)."""
    if msg.attributes and _walk(msg.attributes):
        _walk(json.loads(text, parse_int=_exact_int).get("attributes") or {})
    return msg


def _exact_int(digits: str) -> int:
    """The exact re-parse's integers, refused before Python's own digit limit could raise (orjson already
    refuses any number beyond a double's range, so this is a second fence)."""
    if len(digits) > MAX_INT_DIGITS:
        raise BadMessage("schema", f"an integer of {len(digits)} digits does not fit 64 bits; send it as a string")
    return int(digits)


def _check_depth(obj: dict[str, Any]) -> None:
    """Every field pydantic does not type itself (attributes, unknown fields) at most MAX_JSON_DEPTH deep:
    the walks after this one (the exact re-parse, validation, the output) then never go deep."""
    where = too_deep(obj, MAX_JSON_DEPTH, skip=("text", "lines"))
    if where is not None:
        raise BadMessage("schema", f"{where}: nests deeper than {MAX_JSON_DEPTH} levels of objects/arrays")


def _walk(attributes: Any) -> bool:
    """Check depth and integer range; True if a float of magnitude 2**63 or more is there."""
    suspect = False
    stack: list[tuple[Any, str, int]] = [(attributes, "attributes", 1)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_ATTRIBUTE_DEPTH:
                raise BadMessage("schema", f"attributes nest deeper than {MAX_ATTRIBUTE_DEPTH} levels (at {where})")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, f"{where}.{k}", depth + 1) for k, v in items)
        elif isinstance(value, float):
            suspect = suspect or abs(value) >= _BIG_FLOAT
        elif isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
            raise BadMessage("schema", f"{where}: the integer {str(value)[:40]} does not fit 64 bits and would "
                                       "not pass through exactly; send it as a string")
    return suspect


def _json_type(obj: Any) -> str:
    return {list: "array", bool: "boolean", int: "number", float: "number"}.get(type(obj), "null")


def decode_input(value: bytes | None, *, max_bytes: int) -> InputMessage:
    """A Kafka record value -> InputMessage, or BadMessage (rules: docs/messages.md)."""
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
    if value is None:
        raise BadMessage("null_value", "the record has no value (a tombstone)")
    if len(value) > max_bytes:
        raise BadMessage("oversize", f"{len(value)} bytes, more than the limit of {max_bytes}")
    try:
        return _decode(value)
    except BadMessage:
        raise
    except RecursionError:
        raise BadMessage("schema", "value: nests too deep to decode (RecursionError)") from None
    except MemoryError:
        raise BadMessage("schema", "value: decoding it needs more memory than the worker has (MemoryError)") from None
    except Exception as exc:  # noqa: BLE001 - routed: any decoding failure is this message's dead letter
        # Our words, not the exception's text (which can quote the input): its class names what went wrong.
        raise BadMessage("schema", f"value: a shape the decoder does not read ({type(exc).__name__})") from None


def _decode(value: bytes) -> InputMessage:
    try:
        return _decode_value(value)
    except TooDeep as exc:
        raise BadMessage("schema", str(exc)) from None


def _decode_value(value: bytes) -> InputMessage:
    try:
        text = str(value, "utf-8")
    except UnicodeDecodeError as exc:
        export = from_proto(value) if value[:1] == b"\n" else None   # field 1 (resourceLogs) of a protobuf export
        if export is None:
            raise BadMessage("invalid_utf8", f"invalid UTF-8 at byte {exc.start}: {exc.reason} (and not an OTLP "
                                             "protobuf logs export)") from None
        return _from_export(export, "otlp_proto")
    if value[:1] == b"\n" and b"\x12" in value[:PROTO_SNIFF_BYTES]:   # a small export can be valid UTF-8
        export = from_proto(value)
        if export is not None:
            return _from_export(export, "otlp_proto")
    text = text.removeprefix("\ufeff")
    head = text.lstrip()
    if not head:
        raise BadMessage("empty_text", "the value is empty or only whitespace")
    if head[0] == "{":
        return _decode_object(text)
    if head[0] in _JSON_START:
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # plain text that merely starts like JSON, e.g. '[ 12.3] kernel: ...'
        else:
            if isinstance(obj, str):
                return _validate({"text": obj})
            raise BadMessage("not_an_object", f"a JSON {_json_type(obj)}, not an object or text")
    return InputMessage(text=text)


def _decode_object(text: str) -> InputMessage:
    try:
        obj = orjson.loads(text)  # at most ORJSON_MAX_DEPTH levels (orjson's own limit: schema beyond)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):  # orjson's own limit: nesting, a schema reason
            raise BadMessage("schema", f"nests deeper than {ORJSON_MAX_DEPTH} levels of objects/arrays "
                                       "(the JSON decoder's limit)") from None
        raise BadMessage("invalid_json", f"starts with '{{' but is not valid JSON: {exc}") from None
    if isinstance(obj, dict):
        _check_depth(obj)
        if is_export(obj):
            return _from_export(obj, "otlp_json")
        if obj.get("text") is None and obj.get("lines") is None:
            record = read_record(obj)
            if record is not None:
                return _check_attributes(_validate(document_fields(obj, record)), text)
    return _check_attributes(_validate(obj), text)


def _from_export(obj: dict, encoding: str) -> InputMessage:
    """An OTLP logs export request (worker/messages/otlp.py) as one document of its log records."""
    try:
        export = read_export(obj)
    except InvalidExport as exc:
        raise BadMessage("invalid_otlp", f"an OTLP logs export ({encoding}) with {exc}") from None
    if not export.lines:
        raise BadMessage("empty_text", f"an OTLP logs export ({encoding}) with no log records")
    return _validate({"lines": export.lines, "source": export.source, "kind": "log"})


def encode_output(msg: OutputMessage) -> bytes:
    return orjson.dumps(msg.model_dump(exclude={"window"} if msg.window is None else None))


def output_key(input_key: bytes | None, msg: OutputMessage) -> bytes:
    return input_key if input_key is not None else msg.id.encode()
