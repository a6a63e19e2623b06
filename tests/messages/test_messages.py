"""Input decoding (table and property tests over bad inputs), outputs, dead-letter headers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.messages.models import (
    ERROR_CLASSES,
    MAX_ATTRIBUTE_DEPTH,
    BadMessage,
    InputMessage,
    OutputMessage,
    decode_input,
    default_id,
    encode_output,
    output_key,
)

LIMIT = 4096
FIELDS = ("text", "lines", "id", "source", "kind", "attributes")

PROPERTY = settings(deadline=None)  # no per-example deadline: CI machines are shared


def _bad(value: bytes | None, max_bytes: int = LIMIT) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        decode_input(value, max_bytes=max_bytes)
    return info.value


BAD_TABLE: list[tuple[bytes | None, str]] = [
    (None, "null_value"),
    (b"x" * (LIMIT + 1), "oversize"),
    (b"\xff", "invalid_utf8"),
    (b"ok \xc3\x28 then", "invalid_utf8"),
    (b"\xed\xa0\x80", "invalid_utf8"),  # an encoded surrogate
    (b'{"text": "truncated', "invalid_json"),
    (b"{'text': 'single quotes'}", "invalid_json"),
    (b'  \n{"text": "a",}', "invalid_json"),
    (b'{"text": "\\ud800"}', "invalid_json"),  # a lone surrogate escape
    (b"[1, 2]", "not_an_object"),
    (b'["text"]', "not_an_object"),
    (b"42", "not_an_object"),
    (b"-1.5e3", "not_an_object"),
    (b"true", "not_an_object"),
    (b"null", "not_an_object"),
    (b"", "empty_text"),
    (b" \t\r\n ", "empty_text"),
    (b"\xef\xbb\xbf  ", "empty_text"),
    (b'"   "', "empty_text"),
    (b"{}", "missing_text"),
    (b'{"id": "x", "source": "s"}', "missing_text"),
    (b'{"text": null}', "missing_text"),
    (b'{"text": ""}', "empty_text"),
    (b'{"text": " \\n\\t"}', "empty_text"),
    (b'{"lines": []}', "empty_text"),
    (b'{"lines": ["", "  "]}', "empty_text"),
    (b'{"text": 5}', "schema"),
    (b'{"text": ["a"]}', "schema"),
    (b'{"lines": "a"}', "schema"),
    (b'{"lines": ["a", 1]}', "schema"),
    (b'{"lines": ["a", null]}', "schema"),
    (b'{"text": "a", "lines": ["b"]}', "schema"),
    (b'{"text": "a", "id": 7}', "schema"),
    (b'{"text": "a", "id": ""}', "schema"),
    (b'{"text": "a", "id": "  "}', "schema"),
    (b'{"text": "a", "source": false}', "schema"),
    (b'{"text": "a", "kind": 1}', "schema"),
    (b'{"text": "a", "attributes": [1]}', "schema"),
    (b'{"text": "a", "attributes": "k=v"}', "schema"),
]


@pytest.mark.parametrize("value, error_class", BAD_TABLE, ids=[repr(v)[:40] for v, _ in BAD_TABLE])
def test_bad_input_table(value: bytes | None, error_class: str) -> None:
    err = _bad(value)
    assert err.error_class == error_class, err.message
    assert err.message and "\n" not in err.message and error_class in ERROR_CLASSES


GOOD_TABLE: list[tuple[bytes, dict[str, Any]]] = [
    (b"link down on gnb-017", {"text": "link down on gnb-017"}),
    (b"\xef\xbb\xbfBOM then text", {"text": "BOM then text"}),
    (b"[ 12.345] kernel: oops", {"text": "[ 12.345] kernel: oops"}),
    (b"2024-05-01T12:00:00Z ERROR x", {"text": "2024-05-01T12:00:00Z ERROR x"}),
    (b"404 not found", {"text": "404 not found"}),
    (b'"GET /" 500', {"text": '"GET /" 500'}),
    (b'"a JSON string"', {"text": "a JSON string"}),
    (b'  {"text": "padded"}  ', {"text": "padded"}),
    (b'{"lines": ["a", "  ", "b"]}', {"lines": ["a", "  ", "b"]}),
    (b'{"text": null, "lines": ["x"]}', {"lines": ["x"]}),
    (b'{"text": "t", "future_field": {"x": 1}}', {"text": "t"}),
    (b'{"text": "t", "id": "i", "source": "amf-2/syslog", "kind": "custom", "attributes": {"a": [1, null]}}',
     {"text": "t", "id": "i", "source": "amf-2/syslog", "kind": "custom", "attributes": {"a": [1, None]}}),
]


@pytest.mark.parametrize("value, expected", GOOD_TABLE, ids=[repr(v)[:40] for v, _ in GOOD_TABLE])
def test_good_input_table(value: bytes, expected: dict[str, Any]) -> None:
    msg = decode_input(value, max_bytes=LIMIT)
    assert msg.model_dump(exclude_none=True) == expected
    assert not hasattr(msg, "future_field")


def test_document_joins_lines_and_size_limit_is_inclusive() -> None:
    assert decode_input(b'{"lines": ["a", "b"]}', max_bytes=LIMIT).document == "a\nb"
    assert decode_input(b"x" * 10, max_bytes=10).document == "x" * 10
    assert _bad(b"x" * 11, max_bytes=10).error_class == "oversize"
    assert _bad(b"\xff" * 11, max_bytes=10).error_class == "oversize"  # size is checked first
    with pytest.raises(ValueError):
        decode_input(b"x", max_bytes=0)


# --- property tests ---------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8), inner, max_size=4), max_leaves=12)
nonblank = st.text(min_size=1, max_size=200).filter(lambda s: not s.isspace())
blank = st.text(alphabet=" \t\r\n\x0b\x0c\u00a0\u2003\u3000", max_size=30)


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_raise_bad_message(value: bytes) -> None:
    try:
        msg = decode_input(value, max_bytes=200)
    except BadMessage as err:
        assert err.error_class in ERROR_CLASSES and err.message
    else:
        assert len(value) <= 200 and msg.document.strip()


@PROPERTY
@given(st.binary(max_size=40), st.sampled_from([b"\xff", b"\xc0\xaf", b"\x80", b"\xe2\x82", b"\xf5\x80\x80\x80"]),
       st.binary(max_size=40))
def test_invalid_utf8(prefix: bytes, bad: bytes, suffix: bytes) -> None:
    value = prefix.decode("utf-8", "ignore").encode() + bad + b"\x00" + suffix
    assert _bad(value).error_class == "invalid_utf8"


@PROPERTY
@given(st.binary(min_size=11, max_size=200))
def test_oversize(value: bytes) -> None:
    assert _bad(value, max_bytes=10).error_class == "oversize"


@PROPERTY
@given(json_values.filter(lambda v: not isinstance(v, (dict, str))), st.sampled_from(["", " ", "\n\t"]))
def test_json_non_objects(value: Any, pad: str) -> None:
    assert _bad(pad.encode() + orjson.dumps(value)).error_class == "not_an_object"


@PROPERTY
@given(st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=4), st.integers(1, 50))
def test_truncated_json_objects(obj: dict[str, Any], cut: int) -> None:
    text = orjson.dumps(obj).decode()
    assert _bad(text[: max(1, len(text) - cut)].encode()).error_class == "invalid_json"


@PROPERTY
@given(blank, st.sampled_from(["plain", "json_text", "json_string", "lines"]))
def test_whitespace_only_documents(ws: str, form: str) -> None:
    value = {"plain": ws.encode(), "json_text": orjson.dumps({"text": ws}), "json_string": orjson.dumps(ws),
             "lines": orjson.dumps({"lines": [ws, ws]})}[form]
    assert _bad(value).error_class == "empty_text"


def _wrong_type(field: str) -> st.SearchStrategy[Any]:
    if field == "lines":
        return json_values.filter(lambda v: v is not None and not isinstance(v, list)) | st.lists(
            json_values.filter(lambda v: not isinstance(v, str)), min_size=1, max_size=3).map(lambda x: ["ok", *x])
    if field == "attributes":
        return json_values.filter(lambda v: v is not None and not isinstance(v, dict))
    return json_values.filter(lambda v: v is not None and not isinstance(v, str))


@PROPERTY
@given(st.data(), st.sampled_from(FIELDS))
def test_wrong_type_for_each_field(data: st.DataObject, field: str) -> None:
    obj: dict[str, Any] = {"lines": ["x"]} if field == "text" else {"text": "x"}
    if field == "lines":
        obj = {}
    obj[field] = data.draw(_wrong_type(field))
    err = _bad(orjson.dumps(obj))
    assert err.error_class == "schema" and field in err.message


optional_str = st.none() | nonblank


@PROPERTY
@given(st.one_of(nonblank.map(lambda t: {"text": t}),
                 st.lists(st.text(max_size=30), min_size=1, max_size=5).filter(
                     lambda ls: any(not s.isspace() and s for s in ls)).map(lambda ls: {"lines": ls})),
       optional_str, optional_str, optional_str, st.none() | st.dictionaries(st.text(max_size=8), json_values,
                                                                           max_size=3))
def test_good_json_round_trip(doc: dict[str, Any], id_: str | None, source: str | None, kind: str | None,
                              attributes: dict[str, Any] | None) -> None:
    obj = {**doc, "id": id_, "source": source, "kind": kind, "attributes": attributes}
    msg = decode_input(orjson.dumps(obj), max_bytes=1 << 20)
    assert msg.model_dump() == {"text": None, "lines": None, **obj}
    assert msg.document == (doc["text"] if "text" in doc else "\n".join(doc["lines"]))
    assert InputMessage.model_validate(orjson.loads(orjson.dumps(msg.model_dump()))) == msg


@PROPERTY
@given(nonblank)
def test_plain_and_json_string_text_round_trip(text: str) -> None:
    plain = "x" + text  # cannot start like JSON
    assert decode_input(plain.encode(), max_bytes=1 << 20).text == plain
    assert decode_input(orjson.dumps(text), max_bytes=1 << 20).text == text


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


def test_attributes_nesting_is_bounded_at_decode() -> None:
    """Deeper than MAX_ATTRIBUTE_DEPTH: a `schema` dead letter before the model runs, not a model_error after."""
    ok = decode_input(orjson.dumps({"text": "x", "attributes": {"a": _nested(MAX_ATTRIBUTE_DEPTH - 1)}}), max_bytes=LIMIT)
    assert encode_output(_output(attributes=ok.attributes))  # the deepest accepted still encodes
    for depth in (MAX_ATTRIBUTE_DEPTH, 260):
        with pytest.raises(BadMessage) as exc:
            deep = b"[" * depth + b'"leaf"' + b"]" * depth  # raw: orjson cannot write 260 levels
            decode_input(b'{"text": "x", "attributes": {"a": ' + deep + b"}}", max_bytes=1 << 20)
        assert exc.value.error_class == "schema" and f"deeper than {MAX_ATTRIBUTE_DEPTH}" in exc.value.message


@pytest.mark.parametrize("number", ["123456789012345678901234567890", "-9223372036854775809", "18446744073709551616"])
def test_integers_beyond_64_bits_are_refused_not_rounded(number: str) -> None:
    value = b'{"text": "x", "attributes": {"site": {"ids": [1, ' + number.encode() + b']}}}'
    with pytest.raises(BadMessage) as exc:
        decode_input(value, max_bytes=LIMIT)
    assert exc.value.error_class == "schema"
    assert "attributes.site.ids.1" in exc.value.message and "64 bits" in exc.value.message


@pytest.mark.parametrize("number", ["18446744073709551615", "-9223372036854775808", "1234567890123456789012.5"])
def test_numbers_within_range_pass_through_exactly(number: str) -> None:
    value = b'{"text": "long id 123456789012345678901234567890 in the text", "attributes": {"n": ' + number.encode() + b"}}"
    msg = decode_input(value, max_bytes=LIMIT)
    assert orjson.loads(encode_output(_output(attributes=msg.attributes)))["attributes"] == orjson.loads(b'{"n": ' + number.encode() + b"}")


# --- outputs and dead letters -------------------------------------------------------------------

def _output(**changes: Any) -> OutputMessage:
    base: dict[str, Any] = dict(
        id=default_id("in", 2, 41), source="gnb-017/oam", kind="log", attributes={"site": "x", "n": [1, 2]},
        input={"topic": "in", "partition": 2, "offset": 41}, summary={"text": "Cell 3 lost sync.", "source": "model", "reason": "passed"}, highlights=["l1", "l2"],
        mode="generative", model="tiny-random", tokens={"input": 120, "output": 30, "chunks": 1},
        truncated=False, timing_ms={"queued": 1.5, "gpu": 20.0, "total": 25.25},
        digest={"lines": 2, "templates_total": 1, "templates": [
            {"pattern": "cell <n> lost sync", "count": 2, "first_line": 1, "last_line": 2, "example": "cell 3 lost sync"}]},
    )
    return OutputMessage.model_validate({**base, **changes})


def test_output_round_trip_and_key() -> None:
    msg = _output()
    data = encode_output(msg)
    assert orjson.loads(data)["schema_version"] == 5 and orjson.loads(data)["id"] == "in:2:41"
    assert OutputMessage.model_validate(orjson.loads(data)) == msg  # what a consumer of the topic reads
    assert output_key(None, msg) == b"in:2:41" and output_key(b"k", msg) == b"k"


@pytest.mark.parametrize("changes", [
    {"mode": "abstractive"}, {"mode": "extractive"}, {"schema_version": 4}, {"summary": "bare text"},
    {"summary": {"text": "t", "source": "model", "reason": "maybe"}},
    {"tokens": {"input": 1, "output": 1, "chunks": 0}}, {"digest": {"lines": 1}},
    {"input": {"topic": "in", "partition": -1, "offset": 0}}, {"surprise": 1}, {"id": ""},
])
def test_output_rejects_invalid(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        _output(**changes)
