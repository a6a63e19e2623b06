"""Where a header ends when sources' conventions seem to disagree (issue 37, item 2): a function named after a
trace arrow (`=> name: `) is header, a subsystem's own `Name: ` prefix is the message's; and a record's stack
trace is no part of the message its header line logged (bench/headers.py's record message)."""

from __future__ import annotations

import pytest

from bench import headers
from worker.digest.formats import read


@pytest.mark.parametrize("line,message", [
    # a function named after a trace arrow, after the level, is the code place (a header field, as a logger)
    ('[2024-02-01 08:00:00] dirsrv debug  => check_acl: read access to "cn=ops" granted',
     'read access to "cn=ops" granted'),
    ('2024-02-01 08:00:00.120 DEBUG <= send_result: err=0 matched=""', 'err=0 matched=""'),
    # an arrow before anything else is the message's
    ("2024-02-01 08:00:00.120 INFO => 3 rows copied", "=> 3 rows copied"),
    ("2024-02-01 08:00:00.120 INFO a => b: mapped", "a => b: mapped"),
])
def test_a_trace_arrow_and_function_after_the_level_are_header(line, message):
    assert read(line).messages[0] == message


@pytest.mark.parametrize("line,message", [
    # a subsystem naming itself in its text, after a level token or right after the time
    ("2024-02-01 08:00:00 12 [Warning] Aria: table t1 marked crashed", "Aria: table t1 marked crashed"),
    ("240201  8:00:00  Aria: recovery of tables finished", "Aria: recovery of tables finished"),
    ("2024-02-01 08:00:00,120 WARN scheduler: job 7 late", "scheduler: job 7 late"),
    # a level word closed by `:` is the level, never a program
    ("2024-02-01 08:00:00 ERROR: disk quota exceeded on /srv", "disk quota exceeded on /srv"),
    ("2024-02-01 08:00:00 warning: disk 91% full", "disk 91% full"),
    # a source place keeps its own reading
    ("2024/02/01 08:00:00 server.go:42: listening on :8080", "listening on :8080"),
    # prose after the time: no tag
    ("2024-02-01 08:00:00 Started worker pool: 4 threads", "Started worker pool: 4 threads"),
])
def test_a_subsystem_prefix_stays_in_the_message(line, message):
    assert read(line).messages[0] == message


def test_a_record_message_ends_where_its_stack_trace_starts():
    record = ("[2024-02-01 08:00:00,120] {runner.py:88} ERROR - nightly export failed\n"
              "Traceback (most recent call last):\n"
              '  File "/srv/app/runner.py", line 88, in run\n'
              "    export()\n"
              "OSError: disk full")
    got = headers.predict(record)
    assert (got["level"], got["message"]) == ("ERROR", "nightly export failed")
    java = ("2024-02-01 08:00:00,120 ERROR [main] o.a.Job - export failed\n"
            "java.lang.IllegalStateException: closed\n"
            "\tat o.a.Job.run(Job.java:12)")
    assert headers.predict(java)["message"] == "export failed"


def test_a_record_keeps_its_wrapped_lines():
    record = ("[2024-02-01 08:00:00,120] {runner.py:88} INFO - files queued:\n"
              "  /srv/in/a.csv\n"
              "  /srv/in/b.csv")
    assert headers.predict(record)["message"] == "files queued:\n  /srv/in/a.csv\n  /srv/in/b.csv"


@pytest.mark.parametrize("line,host", [
    # a column of digits alone before the level is a thread or connection id, never a host, at any length
    ("2024-02-01 08:00:00 140093528303360 [Warning] Aria: table t1 marked crashed", ""),
    ("2024-02-01 08:00:00 88231907 ERROR replica 3 lost", ""),
    ("2024-02-01 08:00:00 12 [Warning] Aria: table t1 marked crashed", ""),
    # a host name or an address stays the host
    ("2024-02-01 08:00:00 web-01 [Warning] Aria: table t1 marked crashed", "web-01"),
    ("2024-02-01 08:00:00 10.0.0.7 ERROR replica 3 lost", "10.0.0.7"),
])
def test_a_numeric_id_column_is_no_host(line, host):
    r = read(line)
    assert ((r.hosts or [""])[0], r.levels[0]) == (host, "WARN" if "Warning" in line else "ERROR")
