"""OTLP logs export requests as whole record values (otlp_json and otlp_proto) -> one document of lines."""

from __future__ import annotations

import orjson
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from worker.messages.models import BadMessage, decode_input

LIMIT = 1 << 20
T0 = 1764583200000000000  # 2025-12-01T10:00:00Z in nanoseconds


def export(n: int = 3, service: str = "amf-2", **record) -> dict:
    recs = [{"timeUnixNano": str(T0 + i * 10**9), "severityNumber": 17 if i == 1 else 9,
             "body": {"stringValue": "registration reject" if i == 1 else f"batch {i} sent"},
             "attributes": [{"key": "cause", "value": {"intValue": "11"}}], **record} for i in range(n)]
    return {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                              "scopeLogs": [{"scope": {"name": "x"}, "logRecords": recs}]}]}


def proto(obj: dict) -> bytes:
    return ParseDict(obj, ExportLogsServiceRequest()).SerializeToString()


def _bad(value: bytes) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        decode_input(value, max_bytes=LIMIT)
    return info.value


def test_an_otlp_json_export_is_one_document_of_its_records():
    msg = decode_input(orjson.dumps(export()), max_bytes=LIMIT)
    assert (msg.source, msg.kind, msg.text) == ("amf-2", "log", None)
    assert msg.lines == ["2025-12-01T10:00:00.000Z INFO [amf-2] batch 0 sent cause=11",
                         "2025-12-01T10:00:01.000Z ERROR [amf-2] registration reject cause=11",
                         "2025-12-01T10:00:02.000Z INFO [amf-2] batch 2 sent cause=11"]


def test_the_protobuf_encoding_gives_the_same_document():
    obj = export(4)
    value = proto(obj)
    with pytest.raises(UnicodeDecodeError):
        value.decode()   # what makes the decoder try protobuf (a text document is UTF-8)
    assert decode_input(value, max_bytes=LIMIT) == decode_input(orjson.dumps(obj), max_bytes=LIMIT)


def test_a_small_protobuf_export_that_is_valid_utf8_is_still_an_export():
    obj = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"severityNumber": 17, "body": {"stringValue": "down"}}]}]}]}
    value = proto(obj)
    assert value.decode().startswith("\n")   # no time field: every byte is ASCII
    assert decode_input(value, max_bytes=LIMIT).lines == ["- ERROR [-] down"]
    text = b"\n\x12 a text document with a DC2 byte, not protobuf"
    assert decode_input(text, max_bytes=LIMIT).text == text.decode()


def test_levels_services_nested_values_and_the_digest_of_the_document():
    from worker.digest.document import analyze_document

    obj = export(2)
    obj["resourceLogs"][0]["scopeLogs"][0]["logRecords"] += [
        {"observedTimeUnixNano": str(T0 + 5 * 10**9), "severityText": "Warning", "body": {"kvlistValue": {"values": [
            {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {"stringValue": "x"}]}}}]}}},
        {"timeUnixNano": T0 + 6 * 10**9, "body": {"stringValue": "two\nlines"}}]
    obj["resourceLogs"].append({"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "smf-1"}}]},
                                "scopeLogs": [{"logRecords": [{"severityNumber": 21, "body": {"stringValue": "down"}}]}]})
    msg = decode_input(orjson.dumps(obj), max_bytes=LIMIT)
    assert msg.source == "amf-2,smf-1"
    assert msg.lines[2:] == ["2025-12-01T10:00:05.000Z Warning [amf-2] a=1,x",
                             "2025-12-01T10:00:06.000Z UNSET [amf-2] two lines", "- FATAL [smf-1] down"]
    d = analyze_document(msg.document).digest
    assert d["lines"] == 5 and d["severity"] == {"ERROR": 1, "WARN": 1, "INFO": 1, "FATAL": 1}


def test_a_text_document_that_holds_an_export_stays_a_text_document():
    value = orjson.dumps({"text": "plain", **export()})
    assert decode_input(value, max_bytes=LIMIT).model_dump(exclude_none=True) == {"text": "plain"}


BAD_EXPORTS = [
    ({"resourceLogs": {"a": 1}}, "invalid_otlp", "resourceLogs: a JSON dict, not an array"),
    ({"resourceLogs": [5]}, "invalid_otlp", "resourceLogs.0: a JSON int, not an object"),
    ({"resourceLogs": [{"scopeLogs": "x"}]}, "invalid_otlp", "resourceLogs.0.scopeLogs: a JSON str, not an array"),
    ({"resourceLogs": [{"scopeLogs": [{"logRecords": [None]}]}]}, "invalid_otlp",
     "resourceLogs.0.scopeLogs.0.logRecords.0: a JSON NoneType, not an object"),
    ({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"severityNumber": "ERROR"}]}]}]}, "invalid_otlp",
     "resourceLogs.0.scopeLogs.0.logRecords.0.severityNumber: 'ERROR' is not an integer"),
    ({"resourceLogs": [{"resource": {"attributes": {"k": "v"}}}]}, "invalid_otlp",
     "resourceLogs.0.resource.attributes: a JSON dict, not an array"),
    ({"resourceLogs": []}, "empty_text", "no log records"),
    ({"resourceLogs": [{"scopeLogs": [{"logRecords": []}]}]}, "empty_text", "no log records"),
]


@pytest.mark.parametrize("obj, error_class, reason", BAD_EXPORTS, ids=[r for _, _, r in BAD_EXPORTS])
def test_a_bad_export_is_a_dead_letter_naming_the_place(obj, error_class, reason):
    err = _bad(orjson.dumps(obj))
    assert err.error_class == error_class and reason in err.message and "otlp_json" in err.message


def test_bytes_that_are_neither_utf8_nor_an_export_stay_invalid_utf8():
    for value in (b"\n\xff\xfe", b"\n\x02\x12\x00\xff", proto({"resourceLogs": [{"scopeLogs": [{"logRecords": [{}]}]}]})
                  + b"\xff"):
        err = _bad(value)
        assert err.error_class == "invalid_utf8" and "not an OTLP protobuf logs export" in err.message
