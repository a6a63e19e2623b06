"""One multiline rule (worker/multiline.py) for the digest's records and the windows' events."""

from __future__ import annotations

import pytest

from worker.multiline import continues, joins
from worker.windowing.multiline import Joiner


def test_a_logged_exception_and_a_python_traceback_join_their_event():
    j = Joiner()
    for line in ["2026-03-03 11:22:33 ERROR request failed", "java.lang.IllegalStateException: closed",
                 "\tat a.B.c(B.java:1)", "2026-03-03 11:22:34 ERROR job failed", "Traceback (most recent call last):",
                 '  File "job.py", line 3, in <module>', "KeyError: 'shard'", "2026-03-03 11:22:35 INFO ok"]:
        j.add(line)
    assert j.event_count == 3 and j.events[1].endswith("KeyError: 'shard'")


@pytest.mark.parametrize("line", ["", "   ", "\t"])
def test_a_blank_line_stays_in_its_event_but_continues_no_record(line):
    assert joins(line) and not continues(line)


@pytest.mark.parametrize("line", ["Error: disk full", "panic: boom", "2026-03-03 11:22:33 INFO x", "Exception"])
def test_a_line_of_its_own_neither_joins_nor_continues(line):
    assert not joins(line) and not continues(line)


@pytest.mark.parametrize(("line", "joins"), [
    ("main.(*Relay).flush(0xc000120000, 0x2)", True), ("github.com/ex/relay.run.func1()", True),
    ("(" * 5000, False), ("((" * 2000 + ")", True), ("a(" * 3000 + "b", False), ("(x)", False)])
def test_a_go_frame_is_a_name_and_its_first_parenthesis_to_the_line_end(line, joins):
    assert continues(line) is joins
