"""Continuation lines: the lines a multiline record continues with (the digest's copy of the rule that
worker/windowing/multiline.py joins windows' records by; the two packages import nothing of each other).

A line continues the record before it when it starts with whitespace (a stack frame, a wrapped
message), with `at ` (a Java frame logged without indentation), `Caused by:` / `Suppressed:`,
`... N more`, `goroutine N [` or `[signal ` (a Go panic), `created by `, or when it is a Go stack
frame's function line (`main.main()`, `net/http.(*conn).serve(0xc000...)`), Python's `Traceback (most
recent call last):`, or an exception's class line (`java.lang.IllegalStateException: x`, `ValueError: x`:
what a logger writes under the line that logged it). A blank line is none.
"""

from __future__ import annotations

import re

CONTINUATION = re.compile(r"(?:[ \t]+\S|at |Caused by:|Suppressed:|\.\.\. \d+ more|goroutine \d+ \[|\[signal |created by )"
                          r"|[\w./*()\[\]-]+\(.*\)\Z"
                          r"|Traceback \(most recent call last\):"
                          r"|(?:[\w$]+\.)*[\w$]+(?:Exception|Error|Throwable)(?::\s|\Z)")


def continues(line: str) -> bool:
    """True when `line` continues the record before it (see the module docstring)."""
    return CONTINUATION.match(line) is not None
