"""The per-document pass on text a real stream can carry: every document gets a digest whose counts add up.

Each class of input that broke the pass has its reproduction here (lines written for these tests, shaped like
the failing ones); the seeded property test at the end runs the generator of tests/digest/docgen.py over
lines of every common shape, damaged as transports damage them.
"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.digest import docgen
from worker.digest.digest import MAX_VARIABLES
from worker.digest.formats import read
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


def test_epoch_seconds_with_a_fraction_thirteen_characters_long_are_seconds():
    text = "1927463012.25 relay-3 ERROR link down\n1927463013.50 relay-3 INFO link up\n1927463019 relay-3 INFO idle"
    span = _digest(text)["span"]
    assert span is not None
    assert (span["first"][:19], span["last"][:19], span["seconds"]) == ("2031-01-29T14:23:32", "2031-01-29T14:23:39", 6.75)


_PM = ('<?xml version="1.0" encoding="UTF-8"?>\n<measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/'
       '32.435#measCollec">\n<fileHeader><measCollec beginTime="2031-02-03T04:00:00Z"/></fileHeader><measData>\n'
       '{note}<measInfo measInfoId="Q"><granPeriod duration="PT900S" endTime="2031-02-03T04:15:00Z"/>'
       '<measType p="1">Q.Att</measType><measType p="2">Q.Fail{name}</measType>\n{values}\n</measInfo>\n'
       '</measData><fileFooter><measCollec endTime="2031-02-03T04:15:00Z"/></fileFooter></measCollecFile>')
_VALUES = "\n".join(f'<measValue measObjLdn="Cell={c}"><r p="1">{10 + c}</r><r p="2">{c % 2}</r></measValue>'
                    for c in range(6))


@pytest.mark.parametrize(("note", "name", "values", "read"), [
    ("", "\udce9", _VALUES, True),                                   # a lone surrogate in a counter's name
    ("", "", _VALUES.replace("Cell=3", "Cell=\ud800"), True),         # ... in an object's name
    ("<!-- a <measInfo> was here -->\n", "", _VALUES.replace('<r p="1">12', '<r p="1">\x0212'), False),
])  # a comment naming a measInfo (the file is parsed whole) and a control byte among the values: no XML
def test_a_pm_file_xml_cannot_read_whole_gets_its_line_digest(note, name, values, read):
    d = _digest(_PM.format(note=note, name=name, values=values))
    assert d["lines"] == _PM.count("\n") + values.count("\n") + note.count("\n") + 1
    assert (d["pm"] is not None) == read
    if read:
        assert d["pm"]["objects"] == 6 and d["span"]["seconds"] == 900.0



@pytest.mark.parametrize("rows", [
    ['{"level": "error", "msg": "write failed:\\ndisk full"}', '{"level": "info", "msg": "retrying"}'],
    ['{"level": "warn", "msg": "slow", "path": "/a\\n/b"}', '{"level": "info", "msg": "ok", "path": "/c"}'],
    ['{"level": "error", "message": {"text": "x\\r\\ny"}}', '{"level": "info", "message": "up"}'],
    ['{"level": "error", "time": "Feb 03\\n04:05:06", "msg": "a"}', '{"level": "info", "time": "Feb 03 04:05:07"}'],
    ['{"level": "error", "time": "12:00\\n13:00", "msg": "a"}', '{"level": "info", "msg": "b"}'],
    ['{"level": "error", "time": "2031-02-03\\n04:05:06", "host": "w\\r\\n1", "msg": "a"}',
     '{"level": "info", "time": "2031-02-03 04:05:07", "host": "w1", "msg": "b"}'],
])  # a line break in a JSON record's message or another value: the record is still one line
def test_a_json_record_with_a_line_break_in_a_value_is_one_line(rows):
    d = _digest("\n".join(rows))
    r = read("\n".join(rows))
    assert not any("\n" in s or "\r" in s for s in r.texts + r.stamps + r.hosts)
    assert d["lines"] == 2
    assert sum(d["severity"].values()) == 2
    assert all("\n" not in e["value"] for e in d["entities"])


_EVENT = ('<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event"><System><Provider Name="Disk"/>'
          '<Level>{level}</Level><TimeCreated SystemTime="{time}"/><Computer>{host}</Computer></System></Event>')


def test_a_windows_event_field_broken_over_lines_is_no_field():
    text = "\n".join([_EVENT.format(level=2, time="2031-02-03T04:05:06Z", host="WS-1"),
                      _EVENT.format(level=4, time="2031-02-03T04:05:09Z", host="WS-1").replace('Time="', 'Time="\n'),
                      _EVENT.format(level=4, time="2031-02-03T04:05:08Z", host="WS-1").replace("WS-1<", "WS\n-1<")])
    d = _digest(text)
    assert d["lines"] == 5 and d["severity"] == {"ERROR": 1, "INFO": 4}   # an event's other lines continue it
    assert all("\n" not in e["value"] for e in d["entities"])
    assert d["span"]["first"] == "2031-02-03T04:05:06Z" and d["span"]["last"] == "2031-02-03T04:05:08Z"


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32))
def test_every_mixed_damaged_document_gets_a_digest_whose_figures_hold(seed):
    text = docgen.document(random.Random(seed), docgen.OWN_LINES, most=400)
    docgen.check(text, prepare(text, None, None, OPTIONS))


@pytest.mark.parametrize("unit", ['"', "k=v ", "n=7 ", "<1>"])
def test_a_line_of_thousands_of_variables_gets_a_digest_of_bounded_size(unit):
    d = _digest("2031-02-03T04:05:06Z ERROR " + unit * (60_000 // len(unit)))
    assert all(len(t["variables"]) <= MAX_VARIABLES for t in d["templates"] + d["failures"])
    assert len(orjson.dumps(d)) < 64_000
