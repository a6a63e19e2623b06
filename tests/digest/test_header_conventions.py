"""Where a header ends when sources' conventions seem to disagree (issue 37, item 2): a component tag closed by
`:` right after the time is the program (a header field), one after a level token is the message's own; and a
record's stack trace is no part of the message its header line logged (bench/headers.py's record message)."""

from __future__ import annotations

import pytest

from bench import headers
from worker.digest import header_rows
from worker.digest.formats import read


def message_and_program(line: str) -> tuple:
    return read(line).messages[0], header_rows.columns(line, [line]).field(2)[0]


@pytest.mark.parametrize("line,message,program", [
    ("240201  8:00:00  Aria: recovery of tables finished", "recovery of tables finished", "Aria"),
    ("240201 08:00:00 [ERROR] Aria: recovery of tables failed", "Aria: recovery of tables failed", ""),
    ("2024-02-01 08:00:00.120 scheduler: job 7 queued for run", "job 7 queued for run", "scheduler"),
    ("2024-02-01 08:00:00.120 replica-sync: lag 12 s behind the primary", "lag 12 s behind the primary",
     "replica-sync"),
])
def test_a_tag_right_after_the_time_is_the_program(line, message, program):
    assert message_and_program(line) == (message, program)


@pytest.mark.parametrize("line,message", [
    # after a level token the tag is the message's (a subsystem naming itself in its text)
    ("2024-02-01 08:00:00 12 [Warning] Aria: table t1 marked crashed", "Aria: table t1 marked crashed"),
    ("2024-02-01 08:00:00,120 WARN scheduler: job 7 late", "scheduler: job 7 late"),
    # a level word closed by `:` is the level, never a program
    ("2024-02-01 08:00:00 ERROR: disk quota exceeded on /srv", "disk quota exceeded on /srv"),
    ("2024-02-01 08:00:00 warning: disk 91% full", "disk 91% full"),
    # a source place keeps its own reading
    ("2024/02/01 08:00:00 server.go:42: listening on :8080", "listening on :8080"),
    # prose after the time: no tag
    ("2024-02-01 08:00:00 Started worker pool: 4 threads", "Started worker pool: 4 threads"),
])
def test_what_the_tag_rule_leaves_alone(line, message):
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
