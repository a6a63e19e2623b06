"""Shippers' JSON records (Vector, Fluent Bit, journald, an OTLP log record) are one-line documents."""

from __future__ import annotations

import orjson
import pytest

from worker.messages.models import BadMessage, decode_input
from worker.messages.shippers import parse_time, read_record

VECTOR = {"message": "sshd[811]: Failed password for root from 10.0.0.7 port 22", "host": "web-1",
          "timestamp": "2024-05-01T12:00:00.123456789Z", "source_type": "file", "file": "/var/log/auth.log"}
VECTOR_K8S = {"message": "GET /healthz 200", "kubernetes": {"pod_name": "api-7d9f", "pod_namespace": "shop",
              "container_name": "api"}, "timestamp": "2024-05-01T12:00:01Z", "stream": "stdout"}
FLUENT_BIT = {"@timestamp": 1714564802.5, "log": "E0501 12:00:02 controller.go:114] sync failed\n",
              "stream": "stderr", "kubernetes": {"pod_name": "ctrl-0", "namespace_name": "kube-system",
                                                 "container_name": "manager", "host": "node-3"}}
JOURNALD = {"MESSAGE": "Started Session 4 of user root.", "_HOSTNAME": "db-2", "PRIORITY": "3",
            "SYSLOG_IDENTIFIER": "systemd", "__REALTIME_TIMESTAMP": "1714564803000000", "_SYSTEMD_UNIT": "init.scope"}
OTLP_RECORD = {"timeUnixNano": "1714564804000000000", "severityText": "ERROR", "body": {"stringValue": "db down"},
               "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "checkout"}},
                                           {"key": "host.name", "value": {"stringValue": "vm-9"}}]}}
HOSTNAME_ONLY = {"msg": "disk 91% full", "hostname": "nas-1", "time": "2024-05-01 12:00:05"}

CASES = [
    (VECTOR, VECTOR["message"], "web-1", "2024-05-01T12:00:00.123Z", "vector", None),
    (VECTOR_K8S, "GET /healthz 200", "api-7d9f/api", "2024-05-01T12:00:01.000Z", "vector", None),
    (FLUENT_BIT, "E0501 12:00:02 controller.go:114] sync failed", "ctrl-0/manager", "2024-05-01T12:00:02.500Z",
     "fluent-bit", None),
    (JOURNALD, "2024-05-01T12:00:03.000Z ERROR [db-2] " + JOURNALD["MESSAGE"], "db-2", "2024-05-01T12:00:03.000Z",
     "journald", "ERROR"),
    (OTLP_RECORD, "2024-05-01T12:00:04.000Z ERROR [vm-9] db down", "vm-9", "2024-05-01T12:00:04.000Z", "otlp",
     "ERROR"),
    (HOSTNAME_ONLY, "disk 91% full", "nas-1", "2024-05-01T12:00:05.000Z", "json", None),
]


@pytest.mark.parametrize("record,line,source,time,shape,level", CASES)
def test_a_shipper_record_is_a_one_line_document(record, line, source, time, shape, level):
    msg = decode_input(orjson.dumps(record), max_bytes=1 << 20)
    assert msg.document.rstrip("\n") == line
    assert msg.source == source and msg.kind == "log"
    assert msg.attributes["shipper"] == shape and msg.attributes["time"] == time
    assert msg.attributes.get("level") == level


def test_the_records_own_fields_win():
    value = dict(VECTOR, source="auth/sshd", kind="syslog", id="r-1", attributes={"tenant": "a", "time": "mine"})
    msg = decode_input(orjson.dumps(value), max_bytes=1 << 20)
    assert (msg.source, msg.kind, msg.id) == ("auth/sshd", "syslog", "r-1")
    assert msg.attributes["tenant"] == "a" and msg.attributes["time"] == "mine"


def test_text_keeps_precedence_over_a_shipper_field():
    msg = decode_input(b'{"text": "the document", "message": "not this"}', max_bytes=1 << 20)
    assert msg.document == "the document" and msg.attributes is None


@pytest.mark.parametrize("value,error_class", [
    (b'{"host": "web-1", "timestamp": "2024-05-01T12:00:00Z"}', "missing_text"),
    (b'{"message": "   ", "host": "web-1"}', "empty_text"),
    (b'{"message": 12}', "missing_text"),
])
def test_records_without_a_line_stay_dead_letters(value, error_class):
    with pytest.raises(BadMessage) as err:
        decode_input(value, max_bytes=1 << 20)
    assert err.value.error_class == error_class


@pytest.mark.parametrize("value,ms", [
    ("2024-05-01T12:00:00Z", 1714564800000), ("2024-05-01T14:00:00+02:00", 1714564800000),
    (1714564800, 1714564800000), (1714564800123, 1714564800123), ("yesterday", None), (True, None), (None, None),
    (1e17, None), (1e300, None),  # past what a datetime holds: no time, never a broken record
])
def test_time_fields(value, ms):
    assert parse_time(value) == ms


def test_resource_attributes_as_an_object_and_vector_resources():
    assert read_record({"body": "x", "resource": {"attributes": {"k8s.pod.name": "p-1"}}}).source == "p-1"
    assert read_record({"message": "x", "resources": {"service.name": "svc"}}).source == "svc"
    assert read_record({"host": "h"}) is None


def test_a_records_level_field_reaches_the_digest():
    """journald keeps the level in PRIORITY, not in MESSAGE: written into the line's header, the digest counts it."""
    from worker.digest.document import analyze_document

    msg = decode_input(orjson.dumps(JOURNALD), max_bytes=1 << 20)
    digest = analyze_document(msg.document).digest
    assert digest["severity"] == {"ERROR": 1} and digest["span"]["first"] == "2024-05-01T12:00:03Z"
    plain = decode_input(orjson.dumps(VECTOR), max_bytes=1 << 20)   # no level field: the raw line, verbatim
    assert plain.document == VECTOR["message"]


def test_a_nonsense_nanosecond_time_is_no_time_and_the_record_is_read():
    from worker.messages.models import decode_input

    msg = decode_input(b'{"message": "disk full", "level": "error", "ts": 1e17, "timestamp": 99999999999999999999999}',
                       max_bytes=1 << 20)
    assert "disk full" in msg.document and "time" not in (msg.attributes or {})


@pytest.mark.parametrize("priority", range(8))
def test_journald_priority_is_the_level_tables_syslog_severity(priority):
    """PRIORITY is a syslog severity: the record's level is the one level table's name for it, which the
    digest counts as written."""
    from worker.digest.document import analyze_document
    from worker.messages.levels import ORDER, from_pri

    rec = read_record({**JOURNALD, "PRIORITY": str(priority)})
    assert rec.level == from_pri(str(priority)) and rec.level in ORDER
    msg = decode_input(orjson.dumps({**JOURNALD, "PRIORITY": str(priority)}), max_bytes=1 << 20)
    assert analyze_document(msg.document).digest["severity"] == {rec.level: 1}
