"""Header shapes read by the grammar of worker/digest/header.py beyond the common ones (issue 37, item 2):
a prefix glued to its `LEVEL:`, a syslog program's own header inside the message, CEF's severity field,
keyed `Host(...)` fields, level words of single producers."""

from __future__ import annotations

import pytest

from worker.digest import header_rows
from worker.digest.formats import read


def fields(line: str) -> tuple:
    r = read(line)
    return r.stamps[0], (r.hosts or [""])[0], r.levels[0], r.messages[0]


@pytest.mark.parametrize("line,level,message", [
    # a configurable prefix (time, client, user, session ids) closed by `>` or `:` and glued to the level
    ("<2026-03-02 10:00:00 UTC 192.0.2.7(51000) app_x db_x user_x 211 7b11aa02.9c idle>LOG:  statement: SELECT 1;",
     "INFO", "statement: SELECT 1;"),
    ("2026-03-02 10:00:00.117 UTC:192.0.2.7(51000):user_x@db_x:[4411]:7:57014:2026-03-02 09:58:00 UTC:9/88:0:"
     "7b11aa02.9c:[unknown]:ERROR:  canceling statement due to user request", "ERROR",
     "canceling statement due to user request"),
    ("2026-03-02 10:00:00.117 UTC:192.0.2.7(51000):user_x@db_x:[4411]:LOCATION:  ProcessInterrupts, backend.c:3190",
     "INFO", "ProcessInterrupts, backend.c:3190"),
])
def test_a_prefix_glued_to_its_level_token(line, level, message):
    _, _, lv, msg = fields(line)
    assert (lv, msg) == (level, message)


def test_a_colon_inside_prose_after_the_time_is_no_level():
    assert fields("2026-03-02 10:00:00 upload to s3://bucket:failed, retry 2") == (
        "2026-03-02 10:00:00", "", None, "upload to s3://bucket:failed, retry 2")


def test_a_syslog_programs_own_time_category_and_level_are_its_header():
    line = ("<30>Mar  2 10:00:00 ns-2 named[4411]: 2026-03-02T10:00:00.117Z resolver: warning: "
            "timed out resolving 'example.net/A/IN'")
    assert fields(line) == ("Mar  2 10:00:00", "ns-2", "INFO", "timed out resolving 'example.net/A/IN'")
    assert read(line).levels == ["INFO"]         # the PRI decides the level; the token is the program's
    assert header_rows.columns(line, [line]).field(4) == ["warning"]


def test_a_syslog_programs_bare_level_is_read_and_its_message_kept():
    line = "Mar  2 10:00:00 gw-1 sshd[77]: error: kex_exchange_identification: connection closed"
    assert fields(line) == ("Mar  2 10:00:00", "gw-1", "ERROR", "error: kex_exchange_identification: connection closed")


@pytest.mark.parametrize("line,level", [
    ("Mar 02 2026 10:00:00.117+0100 192.0.2.9 CEF:0|Acme|Sensor|2.1|4107|Blocked upload of a\\|b file|ERROR|src=1.2.3.4",
     "ERROR"),
    ("Mar 02 2026 10:00:00.117+0100 192.0.2.9 CEF:0|Acme|Sensor|2.1|4107|Port scan|7|src=1.2.3.4", None),
])
def test_cef_severity_is_the_level_where_it_is_a_level_word(line, level):
    r = read(line)
    assert r.levels == [level] and r.messages[0].startswith("192.0.2.9 CEF:0|Acme|Sensor|")


def test_keyed_fields_after_the_time_give_the_host():
    line = ("03/02/26 10:00:00 - Process(811.3) User(mqm) Program(runmqlsr) Host(queue-host-2) Installation(Main) "
            "QMC7001: listener started")
    assert fields(line) == ("03/02/26 10:00:00", "queue-host-2", None, "QMC7001: listener started")


def test_keyed_fields_without_a_host_stay_in_the_message():
    line = "03/02/26 10:00:00 - Process(811.3) User(mqm) listener started"
    assert fields(line)[1:] == ("", None, "Process(811.3) User(mqm) listener started")


@pytest.mark.parametrize("line,level", [("2026-03-02 10:00:00,117 BLAT read event caused by state RUNNING", "TRACE"),
                                        ("2026-03-02 10:00:00,117 CRIT child 4 exited unexpectedly", "CRITICAL")])
def test_supervisord_level_words(line, level):
    assert read(line).levels == [level]
