"""Continuation lines of a multiline event (Java stack traces, Go panics), as Fluent Bit's multiline
parser joins them: a record that continues the event before it is appended to it with a newline,
never starts an event of its own, and is never separated from its first line when a window closes
on its line or byte count.

A line continues the event before it when it starts with whitespace (a stack frame, a wrapped
message), with `at ` (a Java frame logged without indentation), `Caused by:` / `Suppressed:`
(chained exceptions), `... N more`, with `goroutine ` or `[signal ` (a Go panic's stack dump, which
follows its `panic:` line and a blank line), or when it is a Go stack frame's function line
(`main.main()`, `net/http.(*conn).serve(0xc000...)`), `created by `, or empty. Anything else starts
a new event.
"""

from __future__ import annotations

import re

# One regular expression (compiled once): the start rule is "anything that is not a continuation".
CONTINUATION = re.compile(r"(?:[ \t]|at |Caused by:|Suppressed:|\.\.\. \d+ more|goroutine \d+ \[|\[signal |created by )"
                          r"|[\w./*()\[\]-]+\(.*\)\Z"  # a Go stack frame's function line, whole
                          r"|\Z")  # empty


def continues(line: str) -> bool:
    """True when `line` continues the event before it (see the module docstring)."""
    return CONTINUATION.match(line) is not None


class Joiner:
    """Joins a stream of one key's lines into events; pure, no clock.

    `add(line)` returns True when the line continued the open event, False when it started one.
    `events` holds the joined events in order; `lines` counts the records taken in."""

    __slots__ = ("enabled", "events", "lines")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: list[str] = []
        self.lines = 0

    def add(self, line: str) -> bool:
        self.lines += 1
        if self.enabled and self.events and continues(line):
            self.events[-1] = f"{self.events[-1]}\n{line}"
            return True
        self.events.append(line)
        return False

    def text(self) -> str:
        return "\n".join(self.events)
