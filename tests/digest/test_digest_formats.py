"""The format layer and the digest's rules on labelled logs: levels, failures, values, spans, outliers, PM, OTLP."""

from __future__ import annotations

import re

import orjson
import pytest

from worker.digest.clock import sort_keys, stamp_of, true_span
from worker.digest.compact import compact_text
from worker.digest.document import analyze_document
from worker.digest.failures import keyword_level
from worker.digest.formats import clean, read
from worker.messages.levels import ORDER, from_otlp, from_pri, level_word
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.render import render
from worker.demo.samples import FORMATS, format_sample

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
OPTIONS = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True)


def digest_of(lines: list[str]) -> dict:
    return analyze_document("\n".join(lines)).digest


@pytest.fixture(scope="module", params=FORMATS)
def labelled(request):
    s = format_sample(request.param, 240)
    return s, analyze_document("\n".join(s.message["lines"]))


def test_every_line_of_every_format_gets_its_true_level(labelled):
    s, a = labelled
    got = [ORDER[r] if r >= 0 else None for r in a.line_rank.tolist()]
    assert got == list(s.levels)


def test_every_format_gets_its_true_span_and_out_of_order_count(labelled):
    s, a = labelled
    span = a.digest["span"]
    if s.span is None:
        assert span is None
        return
    assert (span["first"], span["last"]) == s.span
    assert span["out_of_order"] == s.out_of_order


def test_every_format_groups_its_messages_exactly(labelled):
    s, a = labelled
    pairs = set(zip(a.templates.line_template.tolist(), s.templates))
    assert len(pairs) == len(set(s.templates)) == len({p for p, _ in pairs})


def test_failures_are_exactly_the_warn_or_worse_lines_ranked_by_incident_weight(labelled):
    s, a = labelled
    fails = sorted(i for f in a.failures for i in f["lines"].tolist())
    truth = [i for i, lv in enumerate(s.levels) if ORDER.index(lv) <= ORDER.index("WARN")]
    assert fails == truth
    weights = [f["weight"] for f in a.failures]
    assert weights == sorted(weights, reverse=True)
    by_level = {}
    for f in a.failures:   # within a level, more lines of a template never rank below fewer of one as new
        by_level.setdefault(f["rank"], []).append(f)
    for group in by_level.values():
        whole = [f["count"] for f in group if f["count"] == a.templates.templates[f["template"]].count]
        assert whole == sorted(whole, reverse=True)


def test_summaries_of_every_format_hold_no_control_bytes(labelled):
    s, _ = labelled
    p = prepare("\n".join(s.message["lines"]), s.message["source"], "log", OPTIONS)
    assert not CONTROL.search(p.summary) and not any(CONTROL.search(h) for h in p.highlights)
    assert not any(CONTROL.search(f["example"]) for f in p.digest["failures"])


@pytest.mark.parametrize("word,level", [
    ("ERRO", "ERROR"), ("EROR", "ERROR"), ("WRN", "WARN"), ("CRIT", "CRITICAL"), ("EMERG", "FATAL"),
    ("ALERT", "CRITICAL"), ("FATAL", "FATAL"), ("SEVERE", "CRITICAL"), ("PANIC", "FATAL"), ("[warn]", "WARN"),
    ("E", "ERROR"), ("W", "WARN"), ("F", "FATAL"), ("Warning", "WARN"), ("Information", "INFO"), ("DEBU", "DEBUG"),
    ("hello", None)])
def test_level_dictionary(word, level):
    assert level_word(word) == level


def test_syslog_pri_and_otlp_severity_numbers():
    assert [from_pri(p) for p in ("131", "0", "12", "14", "15")] == ["ERROR", "FATAL", "WARN", "INFO", "DEBUG"]
    assert [from_otlp(n) for n in (0, 1, 5, 9, 13, 17, 21, 24)] == [None, "TRACE", "DEBUG", "INFO", "WARN", "ERROR",
                                                                   "FATAL", "FATAL"]


def test_rfc5424_priority_gives_the_level_and_the_header_is_not_templated():
    lines = [f"<131>1 2026-12-01T10:00:0{i}Z amf-2 amfd 42 NGAP - NG setup failed for gnb-{i}" for i in range(5)]
    d = digest_of(lines)
    assert d["severity"] == {"ERROR": 5} and d["format"] == "rfc5424"
    assert d["failures"][0]["pattern"].startswith("NG setup failed")
    assert not any(v["name"] in ("Dec", "v2") for t in d["templates"] for v in t["variables"])


def test_ansi_colour_codes_are_stripped_and_go_level_tags_read():
    esc = "\x1b[31m[ERRO]\x1b[0m"
    lines = [f"2026-12-01T10:00:0{i}Z \x1b[36m[INFO]\x1b[0m[SMF][PFCP] heartbeat {i}" for i in range(6)]
    lines.insert(3, f"2026-12-01T10:00:03.5Z {esc}[SMF][PFCP] association release failed peer=upf-1")
    text, cleaned = clean("\n".join(lines))
    assert cleaned == 7 and "\x1b" not in text
    p = prepare("\n".join(lines), "smf-1/log", "log", OPTIONS)
    assert p.digest["severity"] == {"ERROR": 1, "INFO": 6}
    assert "\x1b" not in p.summary + "".join(p.highlights)
    assert p.highlights[0] == "2026-12-01T10:00:03.5Z [ERRO][SMF][PFCP] association release failed peer=upf-1"


def test_a_failure_word_as_a_parameter_or_in_an_info_line_is_no_failure():
    lines = [f"2026-12-01 10:00:{i:02d},000 INFO [main] timer timeout armed timeout=30 fail_on_disconnect=true"
             for i in range(20)]
    lines += ["2026-12-01 10:01:00,000 INFO [main] critical input interrupts enabled",
              "2026-12-01 10:01:01,000 WARN [main] peer hss-1 slow"]
    d = digest_of(lines)
    assert [f["level"] for f in d["failures"]] == ["WARN"] and d["failures"][0]["count"] == 1
    assert keyword_level("fail_on_disconnect=<*> timeout=<n>") is None
    assert keyword_level("no errors found") is None
    assert keyword_level("connection to <ip> failed") == "ERROR"
    assert keyword_level("request timeout towards <ip>") == "WARN"


def test_without_levels_a_failure_word_that_is_the_subject_counts():
    lines = [f"Dec  1 10:00:{i:02d} host sshd[1{i}]: Accepted publickey for oam from 10.0.0.{i}" for i in range(10)]
    lines.append("Dec  1 10:00:30 host sshd[77]: error: maximum authentication attempts exceeded for root")
    d = digest_of(lines)
    assert [f["first_line"] for f in d["failures"]] == [11] and d["failures"][0]["level"] == "ERROR"


def test_failures_are_ranked_by_severity_then_rarity_then_time_and_the_rest_counted_by_level():
    lines = []
    for i in range(40):
        lines.append(f"2026-12-01T10:{i:02d}:00Z nf-1 WARN slow disk" + " deep" * (i % 10))  # 10 WARN templates
        lines.append(f"2026-12-01T10:{i:02d}:30Z nf-1 INFO heartbeat seq={i}")
    lines.append("2026-12-01T11:00:00Z nf-1 FATAL database lost")
    lines.append("2026-12-01T09:00:00Z nf-1 ERROR link down")     # earliest time, written last
    a = analyze_document("\n".join(lines))
    d = a.digest
    assert [f["level"] for f in d["failures"][:2]] == ["FATAL", "ERROR"]
    assert d["omitted"]["failures"] == len(a.failures) - len(d["failures"]) > 0
    assert d["omitted"]["failures_by_level"] == {"WARN": d["omitted"]["failures"]}
    text = render(d, "nf-1/log", "log")
    assert f"more: {d['omitted']['failures'] + len(d['failures']) - 3} WARN" in text
    p = prepare("\n".join(lines), "nf-1/log", "log", OPTIONS)
    assert p.highlights[:2] == ["2026-12-01T11:00:00Z nf-1 FATAL database lost", "2026-12-01T09:00:00Z nf-1 ERROR link down"]
    shapes = [a.templates.line_template[a.templates.lines.index(h)] for h in p.highlights]
    assert len(set(shapes)) == len(shapes)                          # never a template twice


def test_failures_carry_their_first_and_last_time():
    s = format_sample("log4j", 300)
    d = analyze_document("\n".join(s.message["lines"])).digest
    for f in d["failures"]:
        assert f["first_time"] and f["last_time"] and f["first_time"] <= f["last_time"]
        assert d["span"]["first"] <= f["first_time"] and f["last_time"] <= d["span"]["last"]


def test_values_of_variables_are_kept_and_rendered():
    s = format_sample("json", 400)
    p = prepare("\n".join(s.message["lines"]), s.message["source"], "log", OPTIONS)
    fail = next(f for f in p.digest["failures"] if f["pattern"].startswith("diameter"))
    code = next(v for v in fail["variables"] if v["name"] == "result_code")
    assert {x["value"]: x["count"] for x in code["top"]} == s.values["result_code"]
    top = max(s.values["result_code"], key=s.values["result_code"].get)
    assert f"result_code={top} ×{s.values['result_code'][top]}" in p.summary
    cause = max(s.values["cause"], key=s.values["cause"].get)
    assert f"cause={cause} ×{s.values['cause'][cause]}" in p.summary
    assert "Hosts: amf-3" in p.summary


def test_compaction_keeps_failure_lines_verbatim_with_their_values():
    s = format_sample("logfmt", 1000)
    a = analyze_document("\n".join(s.message["lines"]))
    text = compact_text(a)
    for f in a.failures:
        kept = sum(a.templates.lines[i].strip() in text for i in f["lines"].tolist())
        assert kept >= min(f["count"], 10)


def test_the_span_is_earliest_to_latest_with_dates_across_days_never_inverted():
    lines = ["2026-12-01T16:09:00Z a INFO x", "2026-12-06T06:26:00Z a INFO y", "2026-12-01T15:08:00Z a INFO z",
             "2026-12-03T00:00:00Z a INFO w"]
    d = digest_of(lines)
    assert (d["span"]["first"], d["span"]["last"]) == ("2026-12-01T15:08:00Z", "2026-12-06T06:26:00Z")
    assert d["span"]["out_of_order"] == 1 and d["span"]["zone"] == "UTC"
    assert "2026-12-01 15:08:00 – 2026-12-06 06:26:00 UTC (4.6 days)" in render(d)


@pytest.mark.parametrize("stamp,text", [
    ("17/06/09 20:10:40", "2017-06-09T20:10:40"), ("03-17 16:13:38.811", "--03-17T16:13:38.811"),
    ("06/14 15:16:01", "--06-14T15:16:01"), ("2015-10-18 18:01:47,978", "2015-10-18T18:01:47.978"),
    ("081109 203615", "2008-11-09T20:36:15"), ("20171223-22:15:29:606", "2017-12-23T22:15:29.606"),
    ("1203 10:00:00.123456", "--12-03T10:00:00.123456"), ("Sun Dec 04 04:47:44 2005", "2005-12-04T04:47:44"),
    ("1733040000", "2024-12-01T08:00:00Z"), ("1733040000123", "2024-12-01T08:00:00.123Z"),
    ("2026-12-01T11:00:01+01:00", "2026-12-01T10:00:01Z"), ("Dec  1 10:00:01", "--12-01T10:00:01")])
def test_timestamp_forms_of_headers(stamp, text):
    assert stamp_of(stamp).text == text


def test_sort_keys_order_variable_width_stamps_and_syslog_months():
    stamps = ["20171223-22:16:0:119", "20171223-22:15:59:1", "", "20171223-22:16:10:5"]
    ts = true_span(stamps, sort_keys(stamps))
    assert (ts.first.text, ts.last.text, ts.out_of_order) == ("2017-12-23T22:15:59.001", "2017-12-23T22:16:10.005", 1)
    syslog = ["Nov 30 23:59:59", "Dec  1 00:00:01", "Dec  1 00:00:00"]
    ts = true_span(syslog, sort_keys(syslog))
    assert (ts.first.text, ts.last.text, ts.out_of_order) == ("--11-30T23:59:59", "--12-01T00:00:01", 1)


def test_outliers_are_quantities_outside_their_quoted_range():
    lines = [f"2026-12-01T10:00:{i:02d}Z nf INFO req id={1000 + i * 97} port={30000 + i * 611} "
             f"epoch={1733040000 + i} latency_ms={4 + i % 36}" for i in range(60)]
    lines.append("2026-12-01T10:01:00Z nf INFO req id=999999 port=65000 epoch=1933040000 latency_ms=40")
    assert digest_of(lines)["outliers"] == []       # 40 among 4–39; ids, ports, epochs are no quantities
    lines.append("2026-12-01T10:01:01Z nf INFO req id=5 port=1 epoch=1 latency_ms=900")
    out = digest_of(lines)["outliers"]
    assert [(o["name"], o["value"]) for o in out] == [("latency_ms", 900.0)]
    assert not out[0]["others_min"] <= out[0]["value"] <= out[0]["others_max"]


def test_json_lines_with_otlp_severity_numbers():
    lines = [orjson.dumps({"timeUnixNano": str(1764583200000000000 + i * 10**9), "severityNumber": n,
                           "body": f"step {i} done" if n < 13 else "export failed", "service": "otel"}).decode()
             for i, n in enumerate([9, 9, 9, 17, 9, 13])]
    r = read("\n".join(lines))
    assert r.form == "json" and r.levels == ["INFO", "INFO", "INFO", "ERROR", "INFO", "WARN"]
    assert digest_of(lines)["span"]["first"] == "2025-12-01T10:00:00Z"


def test_otlp_resource_logs_are_read_as_lines():
    recs = [{"timeUnixNano": str(1764583200000000000 + i * 10**9), "severityNumber": 17 if i == 2 else 9,
             "body": {"stringValue": "export failed" if i == 2 else f"batch {i} sent"},
             "attributes": [{"key": "peer", "value": {"stringValue": "collector-1"}}]} for i in range(5)]
    doc = {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "amf"}}]},
                             "scopeLogs": [{"logRecords": recs}]}]}
    a = analyze_document(orjson.dumps(doc).decode())
    assert a.digest["lines"] == 5 and a.digest["severity"] == {"ERROR": 1, "INFO": 4}
    assert a.templates.lines[2] == "2025-12-01T10:00:02.000Z ERROR [amf] export failed peer=collector-1"
    assert a.digest["span"]["first"] == "2025-12-01T10:00:00Z"


PM_32435 = """<?xml version="1.0" encoding="UTF-8"?>
<measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/32.435#measCollec">
 <fileHeader fileFormatVersion="32.435 V10.0" vendorName="Acme"><fileSender localDn="gnb-017"/>
  <measCollec beginTime="2026-12-01T10:00:00Z"/></fileHeader>
 <measData><managedElement localDn="ManagedElement=gnb-017"/>
  <measInfo measInfoId="RRC"><granPeriod duration="PT900S" endTime="2026-12-01T10:15:00Z"/>
   <measTypes>RRC.ConnEstabAtt RRC.ConnEstabFail.Cong DRB.UEThpDl</measTypes>
{rows}
  </measInfo></measData>
 <fileFooter><measCollec endTime="2026-12-01T10:15:00Z"/></fileFooter>
</measCollecFile>"""


def test_pm_32435_becomes_a_counter_digest():
    rows = "\n".join(f'   <measValue measObjLdn="NRCellDU={c}"><measResults>1000 {0 if c != 7 else 37} '
                     f'{500 + c if c != 3 else 2}</measResults></measValue>' for c in range(12))
    p = prepare(PM_32435.format(rows=rows), "gnb-017/pm", "pm", OPTIONS)
    pm = p.digest["pm"]
    assert (pm["standard"], pm["managed_element"], pm["granularity_s"]) == ("32.435", "ManagedElement=gnb-017", 900)
    assert (pm["objects"], pm["cells"], pm["counters"]) == (12, 12, 3)
    assert [c["name"] for c in pm["failure_counters"]] == ["RRC.ConnEstabFail.Cong"]
    assert pm["failure_counters"][0]["max_object"] == "NRCellDU=7" and pm["failure_counters"][0]["total"] == 37
    assert {(e["counter"], e["object"]) for e in pm["extremes"]} >= {("DRB.UEThpDl", "NRCellDU=3")}
    assert "RRC.ConnEstabFail.Cong 37 over 1 objects (most 37 at NRCellDU=7)" in p.summary
    assert "ManagedElement=gnb-017" in p.summary and "15 min granularity" in p.summary


def test_pm_28532_measdatafile_with_positional_results():
    xml = ('<measDataFile xmlns="urn:3gpp:28.532"><fileHeader><measCollec beginTime="2026-12-01T10:00:00Z"/>'
           '</fileHeader><measData><measEntity localDn="ManagedElement=amf-2"/><measInfo measInfoId="AMF">'
           '<granPeriod duration="PT300S"/><measType p="1">AMF.RegReq</measType><measType p="2">AMF.RegRej</measType>'
           + "".join(f'<measValue measObjLdn="AMFFunction={i}"><r p="1">{100 + i}</r><r p="2">{i % 2}</r>'
                     f'<suspect>{"true" if i == 0 else "false"}</suspect></measValue>' for i in range(6))
           + "</measInfo></measData></measDataFile>")
    pm = analyze_document(xml).digest["pm"]
    assert (pm["standard"], pm["managed_element"], pm["granularity_s"], pm["suspect"]) == ("28.532",
                                                                                      "ManagedElement=amf-2", 300, 1)
    assert [c["name"] for c in pm["failure_counters"]] == ["AMF.RegRej"] and pm["objects"] == 6 and pm["cells"] == 0


def test_xml_with_entity_declarations_is_not_parsed():
    xml = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><measCollecFile>&a;</measCollecFile>'
    assert analyze_document(xml).digest["pm"] is None


def test_unknown_formats_fall_back_to_templating_whole_lines():
    lines = [f"weird;{i};thing happened" for i in range(5)]
    r = read("\n".join(lines))
    assert r.form is None and r.messages == lines


def test_a_call_without_spaces_is_one_token_and_an_empty_pair_an_empty_field():
    from worker.digest.templates import analyze

    tm = analyze(["synchronized to 10.0.0.1, stratum 3", "synchronized to LOCAL(0), stratum 10",
                  "connection from 10.0.0.2 () at noon", "connection from 10.0.0.3 (host.example) at noon"])
    assert len(tm.templates) == 2
    assert tm.templates[1].pattern == "connection from <ip> (<*>) at noon"


def test_the_model_text_of_every_format_never_has_more_tokens_than_raw(tiny_model):
    from transformers import AutoTokenizer

    from worker.digest.prompt import document_text

    tok = AutoTokenizer.from_pretrained(tiny_model)

    def count(texts):
        return [len(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]]

    for fmt in ("free5gc", "json", "rfc5424", "log4j"):
        for n in (3, 40, 400):
            raw = "\n".join(format_sample(fmt, n).message["lines"])
            out = document_text(raw, analyze_document(raw), min_saving=0.0, count=count)
            assert count([out.text])[0] <= count([raw])[0]
            assert out.compacted or out.text == raw


def test_access_logs_read_status_as_level_and_their_time():
    lines = [f'10.0.0.{i % 5} - - [01/Dec/2026:10:00:{i:02d} +0100] "GET /api/items/{i} HTTP/1.1" '
             f'{503 if i == 7 else 404 if i == 9 else 200} {100 + i} "-" "curl/8"' for i in range(30)]
    lines.append('10.0.0.1 - - [01/Dec/2026:09:59:00 +0100] "POST /login HTTP/1.1" 200 5 "-" "curl/8"')
    d = digest_of(lines)
    assert d["format"] == "access" and d["severity"] == {"ERROR": 1, "WARN": 1, "INFO": 29}
    assert (d["span"]["first"], d["span"]["last"], d["span"]["out_of_order"]) == (
        "2026-12-01T08:59:00Z", "2026-12-01T09:00:29Z", 1)
    assert '"GET /api/items/7 HTTP/1.1" 503' in render(d)


def test_syslog_with_rfc3339_times_reads_host_and_time():
    lines = [f"2026-12-01T10:00:0{i}.123456+00:00 host-1 sshd[12{i}]: Accepted key for oam" for i in range(5)]
    lines.append("2026-12-01T10:00:09.000000+00:00 host-1 sshd[99]: error: kex failed")
    d = digest_of(lines)
    assert d["format"] == "rfc3164" and d["severity"] == {"ERROR": 1}
    assert d["failures"][0]["pattern"] == "error: kex failed" and d["span"]["first"] == "2026-12-01T10:00:00.123456Z"
    log4j = [f"2026-12-01 10:00:0{i},000 INFO com.x.Y: started {i}" for i in range(5)]
    assert digest_of(log4j)["severity"] == {"INFO": 5}       # a level is never taken for a syslog host
