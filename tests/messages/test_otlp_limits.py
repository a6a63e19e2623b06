"""OTLP exports at the limits: linear in services and records, nesting a `schema` dead letter, wrong types
an `invalid_otlp` one naming the place, and every message in Ribbon's words (never Python's)."""

from __future__ import annotations

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from worker.messages import models
from worker.messages.models import BadMessage, decode_input

LIMIT = 1 << 30


def _bad(value: bytes) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        decode_input(value, max_bytes=LIMIT)
    return info.value


def _resource(service: str, n: int) -> dict:
    recs = [{"timeUnixNano": "1764583200000000000", "severityNumber": 9, "body": {"stringValue": f"r{i}"}}
            for i in range(n)]
    return {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeLogs": [{"logRecords": recs}]}


def test_200k_distinct_services_decode_in_linear_time():
    """A list membership test per service costs 2e10 comparisons here (minutes); a map, 200,000 lookups."""
    n = 200_000
    value = orjson.dumps({"resourceLogs": [_resource(f"svc-{i}", 1) for i in range(n)]})
    msg = decode_input(value, max_bytes=LIMIT)
    assert len(msg.lines) == n and msg.source == f"svc-0,svc-1,svc-2 +{n - 3} more"
    assert msg.lines[-1].endswith(f"[svc-{n - 1}] r0")


def test_200k_records_of_one_service_decode_in_linear_time():
    msg = decode_input(orjson.dumps({"resourceLogs": [_resource("amf", 200_000)]}), max_bytes=LIMIT)
    assert len(msg.lines) == 200_000 and msg.source == "amf"


def _nested_proto(depth: int) -> bytes:
    req = ExportLogsServiceRequest()
    rec = req.resource_logs.add().scope_logs.add().log_records.add()
    rec.time_unix_nano = 1
    v = rec.body
    for _ in range(depth):
        kv = v.kvlist_value.values.add()
        kv.key = "k"
        v = kv.value
    v.string_value = "leaf"
    return req.SerializeToString()


def test_a_protobuf_export_nested_past_the_decoder_is_schema_in_our_words():
    assert decode_input(_nested_proto(20), max_bytes=LIMIT).lines[0].endswith("k=k=k=k=k=k=k=k=k=k=k=k=k=k=k="
                                                                               "k=k=k=k=k=leaf")
    err = _bad(_nested_proto(40))
    assert err.error_class == "schema"
    assert err.message.startswith("an OTLP logs export (otlp_proto) nests deeper than the protobuf decoder reads")


def test_json_nested_past_the_json_decoder_is_schema():
    deep = b'{"k":' * 1100 + b"1" + b"}" * 1100
    err = _bad(b'{"resourceLogs": [], "x": ' + deep + b"}")
    assert err.error_class == "schema" and "nests deeper than 1024 levels" in err.message


@pytest.mark.parametrize(("body", "place"), [
    ({"kvlistValue": []}, "logRecords.0.body.kvlistValue: a JSON list, not an object"),
    ({"arrayValue": {"values": "abc"}}, "logRecords.0.body.arrayValue.values: a JSON str, not an array"),
    ({"kvlistValue": {"values": [7]}}, "logRecords.0.body.kvlistValue.values.0: a JSON int, not an object"),
    ({"arrayValue": {"values": [{"kvlistValue": "x"}]}},
     "logRecords.0.body.arrayValue.values.0.kvlistValue: a JSON str, not an object"),
])
def test_a_wrong_type_inside_a_value_is_invalid_otlp_naming_the_place(body, place):
    obj = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": body}]}]}]}
    err = _bad(orjson.dumps(obj))
    assert err.error_class == "invalid_otlp"
    assert err.message == f"an OTLP logs export (otlp_json) with resourceLogs.0.scopeLogs.0.{place}"


def test_an_unforeseen_failure_is_schema_in_our_words_never_the_exceptions_text(monkeypatch):
    def boom(_obj):
        raise TypeError("secret-input-bytes")

    monkeypatch.setattr(models, "read_export", boom)
    err = _bad(orjson.dumps({"resourceLogs": []}))
    assert err.error_class == "schema"
    assert err.message == "value: a shape the decoder does not read (TypeError)"
