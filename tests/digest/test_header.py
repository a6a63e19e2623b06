"""The header grammar read line by line (worker/digest/header.py) and levels without inheritance (issue 37)."""

from __future__ import annotations

import pytest

from worker.digest.document import analyze_document
from worker.digest.formats import read
from worker.messages.levels import ORDER


def digest_of(lines: list[str]) -> dict:
    return analyze_document("\n".join(lines)).digest


def levels_of(lines: list[str]) -> list[str | None]:
    a = analyze_document("\n".join(lines))
    return [ORDER[r] if r >= 0 else None for r in a.line_rank.tolist()]


def fields(line: str) -> tuple:
    r = read(line)
    return r.stamps[0], (r.hosts or [""])[0], r.levels[0], r.messages[0]


def test_headerless_lines_take_no_level_from_the_line_before():
    lines = ["Couldn't open /opt/radio/ue.cfg, using built-in defaults", "Loading radio settings",
             "Starting 2 RF channels on device x310", "Waiting for the PHY to come up", "Attaching to the network",
             "Attach complete. Address: 10.60.0.7"]
    d = digest_of(lines)
    assert levels_of(lines) == ["ERROR", None, None, None, None, None]
    assert d["severity"] == {"ERROR": 1} and [f["count"] for f in d["failures"]] == [1]


def test_only_continuation_lines_inherit_their_record_level():
    lines = ["2026-12-01 10:00:00,000 ERROR [main] request handler crashed", "java.lang.IllegalStateException: x",
             "\tat org.acme.Handler.run(Handler.java:42)", "Caused by: java.io.IOException: closed",
             "\t... 12 more", "2026-12-01 10:00:01,000 INFO [main] serving", "plain text after that line",
             "    an indented line after it"]
    assert levels_of(lines) == ["ERROR"] * 5 + ["INFO", None, None]


def test_continuations_of_a_levelled_line_count_in_its_level_and_are_no_failure_entries():
    lines = ["2026-12-01 10:00:00,000 ERROR [main] request handler crashed",
             "\tat org.acme.Handler.run(Handler.java:42)", "Caused by: java.io.IOException: closed", "\t... 12 more"]
    d = digest_of(lines)
    assert levels_of(lines) == ["ERROR"] * 4
    assert d["severity"] == {"ERROR": 4} and [f["count"] for f in d["failures"]] == [1]


def test_a_supercomputer_ras_line_gives_its_time_node_level_and_message():
    line = ("1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL "
            "INFO instruction cache parity error corrected")
    assert fields(line) == ("1117838570", "R02-M1-N0-C:J12-U11", "INFO", "instruction cache parity error corrected")
    d = digest_of([line, line.replace("15.42.50", "15.42.51").replace("1117838570", "1117838571")])
    assert d["span"]["first"] == "2005-06-03T22:42:50Z" and d["severity"] == {"INFO": 2} and not d["failures"]


def test_a_yearless_slash_time_with_a_colon_and_a_bracketed_component():
    line = "06/30 10:19:02.551: [smf] ERROR: [SMF] session release failed"
    assert fields(line) == ("06/30 10:19:02.551", "", "ERROR", "session release failed")
    d = digest_of([line, "06/30 10:19:03.002: [smf] INFO: [SMF] session created"])
    assert d["span"]["first"] == "--06-30T10:19:02.551" and d["severity"] == {"ERROR": 1, "INFO": 1}


def test_an_epoch_after_leading_columns_is_the_time_and_state_words_are_no_levels():
    lines = [f"{4400 + i} node-{i} unix.hw state_change.unavailable {1077804742 + i} 1 Component State Change: "
             f"Component alt{i} is in the unavailable state" for i in range(6)]
    d = digest_of(lines)
    assert d["span"] is not None and d["span"]["form"] == "epoch_s"
    assert d["severity"] == {} and not d["failures"]


def test_a_syslog_line_after_an_epoch_a_date_and_a_node():
    line = "1131566461 2005.11.09 dn228 Nov 9 12:01:01 dn228/dn228 crond(pam_unix)[2915]: session closed for user root"
    assert fields(line) == ("1131566461", "dn228/dn228", None, "session closed for user root")


def test_a_bracketed_message_body_after_bracketed_tags_is_kept():
    line = "2022-09-15T14:27:25Z [DEBU][LIB][Aper] [PER got 1 bits, byteOffset(after): 0, value: 0x0] (aper.go:100)"
    assert fields(line) == ("2022-09-15T14:27:25Z", "", "DEBUG",
                            "[PER got 1 bits, byteOffset(after): 0, value: 0x0] (aper.go:100)")


RFC5424 = "<165>1 2026-12-01T10:00:00.003Z amf-2 amfd 4242 NGAP - NG setup failed for gnb-7"
RFC3164 = "<163>Dec  1 10:00:01 upf-1 upfd[311]: PFCP association lost with smf-1"


@pytest.mark.parametrize("majority", [RFC5424, RFC3164])
def test_rfc5424_and_rfc3164_are_decided_line_by_line(majority):
    minority = RFC3164 if majority == RFC5424 else RFC5424
    r = read("\n".join([majority] * 12 + [minority]))
    alone = read(minority)
    got = (r.messages[-1], r.levels[-1], r.hosts[-1], r.stamps[-1])
    assert got == (alone.messages[0], alone.levels[0], alone.hosts[0], alone.stamps[0])
    assert read(RFC5424).messages == ["NG setup failed for gnb-7"] and read(RFC3164).hosts == ["upf-1"]


def test_failed_password_is_a_failure_whatever_the_priority_says():
    lines = [f"<38>Dec  1 10:00:{i:02d} bastion sshd[{900 + i}]: Accepted publickey for ops from 10.1.1.{i} port 5{i}"
             for i in range(8)]
    lines += [f"<38>Dec  1 10:01:{i:02d} bastion sshd[{950 + i}]: Failed password for invalid user admin "
              f"from 203.0.113.{i} port 4{i} ssh2" for i in range(3)]
    d = digest_of(lines)
    assert [(f["level"], f["count"]) for f in d["failures"]] == [("WARN", 3)]


@pytest.mark.parametrize("line,expected", [
    ("24-Mar-2021 09:12:44.117 WARNING [worker-3] org.acme.cache.Store.evict Evicted 12 entries",
     ("24-Mar-2021 09:12:44.117", "", "WARN", "Evicted 12 entries")),
    ("[2023-05-02T11:00:09,114][ERROR][o.a.node.Shard] [n1] shard failed", ("2023-05-02T11:00:09,114", "", "ERROR",
                                                                          "shard failed")),
    ("2023-05-02 11:00:09.114 CEST [4412] FATAL:  role \"x\" does not exist",
     ("2023-05-02 11:00:09.114 CEST", "", "FATAL", "role \"x\" does not exist")),
    ("E0502 11:00:09.114000    77 reconcile.go:201] sync failed", ("0502 11:00:09.114000", "", "ERROR", "sync failed")),
    ("W, [2023-05-02T11:00:09.114000 #812]  WARN -- app: disk almost full",
     ("2023-05-02T11:00:09.114000", "", "WARN", "disk almost full")),
    ("Mar  2 11:00:09 edge-4 kernel: eth0 link down", ("Mar  2 11:00:09", "edge-4", None, "eth0 link down")),
    ("2023-05-02T11:00:09.114+02:00 edge-4 ERROR link flap on eth0", ("2023-05-02T11:00:09.114+02:00", "edge-4",
                                                                       "ERROR", "link flap on eth0")),
    ("[02/May/2023:11:00:09 +0200] [notice] worker 3 ready", ("02/May/2023:11:00:09 +0200", "", "NOTICE",
                                                             "worker 3 ready")),
    ("May 02, 2023 11:00:09 AM org.acme.Boot main", ("May 02, 2023 11:00:09 AM", "", None, "org.acme.Boot main")),
    ("20230502-11:00:09:114 INFO session opened", ("20230502-11:00:09:114", "", "INFO", "session opened")),
    ("1683025209.114 GET /health 200", ("1683025209.114", "", "INFO", "GET /health 200")),   # an access status
    ("just some words with no header at all", ("", "", None, "just some words with no header at all")),
    ("2023-05-02 11:00:09,114 - billing.api - WARNING - quota at 91%", ("2023-05-02 11:00:09,114", "", "WARN",
                                                                       "quota at 91%")),
    ("2023-05-02 11:00:09.114  INFO 4242 --- [           main] o.a.c.c.StandardService  : Starting service",
     ("2023-05-02 11:00:09.114", "", "INFO", "Starting service")),
])
def test_header_shapes_nobody_listed(line, expected):
    assert fields(line) == expected


def test_a_windows_event_gives_its_time_level_computer_and_its_lines_continue_it():
    event = ['<Event xmlns="http://schemas.microsoft.com/win/2004/08/events/event">', "  <System>",
             '    <Provider Name="Acme-Backup" />', "    <EventID>7031</EventID>", "    <Level>2</Level>",
             '    <TimeCreated SystemTime="2026-03-02T08:15:00.1234567Z" />', "    <Computer>files-02</Computer>",
             "  </System>", "  <EventData><Data>backup job stopped</Data></EventData>", "</Event>"]
    r = read("\n".join(event + [ln.replace("7031", "7036").replace("<Level>2", "<Level>4") for ln in event]))
    assert r.form == "windows_event" and r.stamps[0] == "2026-03-02T08:15:00.1234567Z" and r.hosts[0] == "files-02"
    assert (r.levels[0], r.levels[10]) == ("ERROR", "INFO") and r.tokens[0] == "2"
    assert r.continued[1:10] == [True] * 9 and r.continued[10] is False


def test_day_first_month_name_times_give_a_span_across_months():
    lines = ["30-Nov-2026 23:59:58.100 INFO [main] org.acme.Job.run tick", "01-Dec-2026 00:00:03.900 WARN [main] "
             "org.acme.Job.run slow tick", "29-Nov-2026 12:00:00.000 INFO [main] org.acme.Job.run start"]
    span = digest_of(lines)["span"]
    assert (span["first"], span["last"], span["form"]) == ("2026-11-29T12:00:00", "2026-12-01T00:00:03.900", "day_month")
    assert span["out_of_order"] == 1


def test_a_twelve_hour_clock_with_a_month_first_date():
    lines = ["Mar 02, 2026 11:59:59 AM org.acme.Boot main", "INFO: starting", "Mar 02, 2026 1:00:00 PM org.acme.Boot main",
             "SEVERE: stopped"]
    d = digest_of(lines)
    assert (d["span"]["first"], d["span"]["last"]) == ("2026-03-02T11:59:59", "2026-03-02T13:00:00")
    assert d["severity"] == {"CRITICAL": 1, "INFO": 1}


@pytest.mark.parametrize("line", ["Note that the cache is cold", "Config loaded from /etc/acme.conf",
                                  "Critical section entered by worker 3", "Trace route to 10.0.0.1 done",
                                  "2026-03-02 10:00:00 Config reloaded from disk", "Verbose output enabled"])
def test_a_level_word_opening_prose_is_no_level_token(line):
    assert read(line).levels == [None]


@pytest.mark.parametrize("line,level", [("INFO: starting", "INFO"), ("Warning: disk almost full", "WARN"),
                                        ("2026-03-02 10:00:00 Error opening /dev/x", "ERROR"),
                                        ("2026-03-02T10:00:00Z\tinfo\tsync/service.go:87\tstarted", "INFO"),
                                        ("2026-03-02 10:00:00, Info      CBS    loaded", "INFO"),
                                        ("2026-03-02 10:00:00 NOTE the build is stale", "NOTICE")])
def test_level_words_where_headers_write_them(line, level):
    assert read(line).levels == [level]
