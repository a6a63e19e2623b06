"""The digest's bulk paths give what the line-by-line and element-by-element paths give.

PM XML values read by pm_scan (regular expressions + numpy) against xml.etree over the whole file;
RFC 3164, ctime and padded sort keys (stamps of one mask) made over the joined stamps against one stamp at
a time; rfc3164 rows read
without the host guard against the guarded header.
"""

from __future__ import annotations

import re

import pytest

from worker.demo.samples import labelled
from worker.digest import formats, pm_scan
from worker.digest.clock import _ctime_key, _ctime_keys, _padded_key, _padded_keys, _syslog_key, sort_keys
from worker.digest.structured import pm_digest

HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/'
        '32_series/32.435#measCollec">\n <fileHeader><fileSender localDn="gnb-1"/><measCollec beginTime='
        '"2026-12-01T10:00:00Z"/></fileHeader>\n <measData><managedElement localDn="ManagedElement=gnb-1"/>\n')
TAIL = ' </measData>\n <fileFooter><measCollec endTime="2026-12-01T10:15:00Z"/></fileFooter>\n</measCollecFile>'


def _r_info(name: str = "RRC", cells: int = 12, value=lambda c, p: (c * 7 + p * 3) % 11 * (100 if c == 5 else 1)) -> str:
    rows = "\n".join(f'  <measValue measObjLdn="NRCellDU={c}">' + "".join(f'<r p="{p}">{value(c, p)}</r>' for p in (1, 2, 3))
                     + f'<suspect>{"true" if c == 2 else "false"}</suspect></measValue>' for c in range(cells))
    return (f' <measInfo measInfoId="{name}"><granPeriod duration="PT900S" endTime="2026-12-01T10:15:00Z"/>\n'
            f'  <measType p="1">{name}.Att</measType><measType p="2">{name}.Fail.Cong</measType>'
            f'<measType p="3">{name}.DropRate</measType>\n{rows}\n </measInfo>\n')


def _results_info(cells: int = 12) -> str:
    rows = "\n".join(f'  <measValue measObjLdn="NRCellCU={c}"><measResults>{1000 + c} {"NIL" if c == 4 else c % 3} '
                     f'{2.5 * c if c != 9 else 900}</measResults></measValue>' for c in range(cells))
    return (' <measInfo measInfoId="DRB"><granPeriod duration="PT900S"/>\n  <measTypes>DRB.Att DRB.RejCount '
            f'DRB.UEThpDl</measTypes>\n{rows}\n </measInfo>\n')


SCANNED = {
    "r": HEAD + _r_info() + TAIL,
    "measResults": HEAD + _results_info() + TAIL,
    "two measInfo, one object in both": HEAD + _r_info() + _r_info("PDU", 7) + TAIL,
    "empty and NIL values": HEAD + _r_info(value=lambda c, p: "" if p == 2 and c % 2 else ("NIL" if c == 3 else c)) + TAIL,
    "a measInfo without values": HEAD + _r_info() + ' <measInfo measInfoId="X"><measTypes>A</measTypes></measInfo>\n'
                                 + TAIL,
    "a labelled quality document": "\n".join(labelled("pm_xml", 0, 300).message["lines"]),
}
PARSED_WHOLE = {
    "an entity in an object": SCANNED["r"].replace("NRCellDU=3", "NRCell&amp;DU=3"),
    "a comment among the values": SCANNED["r"].replace("<r p=\"2\">", "<!-- x --><r p=\"2\">", 1),
    "namespace prefixes": re.sub(r"<(/?)([A-Za-z])", r"<\1m:\2", SCANNED["two measInfo, one object in both"])
                          .replace(' xmlns="', ' xmlns:m="'),
    "single quotes": SCANNED["r"].replace('measObjLdn="NRCellDU=1"', "measObjLdn='NRCellDU=1'"),
    "a self-closing r": SCANNED["r"].replace('<r p="3">8</r>', '<r p="3"/>', 1),
    "another attribute first": SCANNED["r"].replace('<measValue measObjLdn="NRCellDU=6"',
                                                    '<measValue x="1" measObjLdn="NRCellDU=6"'),
    "two measResults in one measValue, none in the next": SCANNED["measResults"].replace(
        "</measResults></measValue>", "</measResults><measResults>1 2 3</measResults></measValue>", 1).replace(
        '<measValue measObjLdn="NRCellCU=1"><measResults>1001 1 2.5</measResults>', '<measValue measObjLdn="NRCellCU=1">'),
    "r and measResults in one measInfo": SCANNED["r"].replace('<r p="1">', "<measResults>1 2 3</measResults><r p=\"1\">", 1),
}


def _whole(text: str, monkeypatch) -> dict | None:
    with monkeypatch.context() as m:
        m.setattr(pm_scan, "skeleton", lambda _text: None)
        return pm_digest(text)


def _scanned(text: str) -> bool:
    sk = pm_scan.skeleton(text)
    return sk is not None and any(sk.regions) and all(pm_scan.scan(r) is not None for r in sk.regions if r)


@pytest.mark.parametrize("name", list(SCANNED) + list(PARSED_WHOLE))
def test_pm_values_read_in_bulk_equal_the_whole_parse(name, monkeypatch):
    text = SCANNED.get(name) or PARSED_WHOLE[name]
    assert _scanned(text) == (name in SCANNED)
    bulk, whole = pm_digest(text), _whole(text, monkeypatch)
    assert bulk == whole and bulk is not None and bulk["counters"] >= 3


def test_pm_bulk_digest_names_what_the_file_holds():
    pm = pm_digest(SCANNED["two measInfo, one object in both"])
    assert (pm["managed_element"], pm["sender"], pm["granularity_s"], pm["suspect"]) == ("ManagedElement=gnb-1",
                                                                                         "gnb-1", 900, 2)
    assert (pm["objects"], pm["cells"], pm["counters"]) == (12, 12, 6)
    assert {e["object"] for e in pm["extremes"]} == {"NRCellDU=5"}
    rejects = pm_digest(SCANNED["measResults"])["failure_counters"]
    assert [c["name"] for c in rejects] == ["DRB.RejCount"] and rejects[0]["objects"] == 7   # NIL: no value


def test_syslog_sort_keys_in_bulk_equal_one_at_a_time():
    fixed = ["Dec  1 10:00:00", "", "Dec 31 23:59:59", "Jan  2 00:00:01", "Feb 10 08:00:00"]
    odd = fixed + ["Mar 3 10:00:00"]                  # a day without its padding: read one at a time
    for stamps in (fixed, odd, ["Dec  1 10:00:00.125", "Dec  1 10:00:00.250"]):
        assert sort_keys(stamps) == [_syslog_key(s) if s else "" for s in stamps]


def test_a_level_word_where_a_syslog_host_stands_is_read_as_the_level_not_the_host():
    lines = ["Dec  1 10:00:00 host1 app[1]: started", "Dec  1 10:00:01 INFO app: something",
             "Dec  1 10:00:02 host2 cron[2]: done", "Dec  1 10:00:03 warning sshd[2]: x"]
    r = formats.read("\n".join(lines))
    assert r.form == "rfc3164" and r.messages == ["started", "app: something", "done", "sshd[2]: x"]
    assert r.hosts == ["host1", "", "host2", ""] and r.levels == [None, "INFO", None, "WARN"]
    assert r.matched == [True, True, True, True]


@pytest.mark.parametrize("stamps", [
    ["03-17 16:13:38.811", "", "03-17 16:13:39.002"],          # one mask, no group to pad
    ["10.30 16:49:06", "10.31 01:02:03", ""],                  # one mask, the last group padded to 3
    ["20171223-22:15:29:606", "20171223-22:15:29:6"],          # two masks: one at a time
    ["1:2:3.4", "5:6:7.8"], ["12 34", "56 78"], ["", ""], ["x", "y"], ["12:00", "\u0663\u0663:00"],
])
def test_padded_sort_keys_in_bulk_equal_one_at_a_time(stamps):
    assert _padded_keys(stamps) == [_padded_key(s) if s else "" for s in stamps]


@pytest.mark.parametrize("stamps", [
    ["Sun Dec 04 04:47:44 2005", "", "Mon Dec 05 10:00:01 2005"],
    ["Sun Dec  4 04:47:44 2005", "Sun Dec 14 04:47:44 2005"],              # a space-padded day
    ["Sun Dec 04 04:47:44.250 2005", "Xyz Abc 04 04:47:44 2005", "Sun"],    # a fraction, no month, too short
    ["Sun Dec 04 04:47:\u0664\u0664 2005", "Sun Dec 04 04:47:44 2005"],    # a digit that is not ASCII
    ["", ""],
])
def test_ctime_sort_keys_in_bulk_equal_one_at_a_time(stamps):
    assert _ctime_keys(stamps) == [_ctime_key(s) if s else "" for s in stamps]


def test_a_document_of_ctime_stamps_sorts_by_the_ctime_keys():
    stamps = ["Sun Dec 04 04:47:44 2005", "", "Mon Dec 05 10:00:01 2005", "Sun Dec 04 04:47:43 2005"]
    assert sort_keys(stamps) == ["20051204044744", "", "20051205100001", "20051204044743"]
