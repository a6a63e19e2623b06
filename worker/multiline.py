"""The multiline rule: which lines continue the record before them (one rule for the digest's records,
worker/digest/, and the windows' events, worker/windowing/; it imports nothing of either).

    continues(line) -> the line continues the record before it (and takes its level in the digest)
    joins(line)     -> the line stays in the event before it when events are joined (windowing):
                       a continuation, or a blank line (a Go panic's blank line before its goroutines)

A line continues the record before it when it starts with whitespace before text (a stack frame, a
wrapped message), with `at ` (a Java frame logged without indentation), `Caused by:` / `Suppressed:`
(chained exceptions), `... N more`, `goroutine N [` or `[signal ` (a Go panic's dump), `created by `,
or when it is a Go stack frame's function line (`main.main()`, `net/http.(*conn).serve(0xc000...)`),
Python's `Traceback (most recent call last):`, or an exception's class line
(`java.lang.IllegalStateException: x`, `ValueError: x`: what a logger writes under the line that
logged it). A blank line continues no record; anything else starts one. TRACE: those of these lines that
open a stack trace (what bench/headers.py keeps out of a record's message, as a trace is no part of it).
"""

from __future__ import annotations

import re

# the lines that open a stack trace or chain one on (indented or not): a frame, a chained exception, a Go
# panic's dump, Python's traceback line, an exception's class line
TRACE = (r"(?:at |Caused by:|Suppressed:|goroutine \d+ \[|\[signal |Traceback \(most recent call last\):"
         r"|(?:[\w$]+\.)*[\w$]+(?:Exception|Error|Throwable)(?::\s|\Z))")
CONTINUATION = re.compile(rf"(?:[ \t]+\S|\.\.\. \d+ more|created by )|{TRACE}"
                          # a Go stack frame's function line, whole: a name up to its first `(` after the name's
                          # first character, taken at once (a lookahead and its backreference: no backtracking
                          # into the name, so a line of many `(` is read in linear time), then `...)` to the end
                          r"|[\w./*()\[\]-](?=(?P<name>[\w./*)\[\]-]*))(?P=name)\(.*\)\Z")
_BLANK = re.compile(r"[ \t]*\Z")


def continues(line: str) -> bool:
    """True when `line` continues the record before it (see the module docstring)."""
    return CONTINUATION.match(line) is not None


def joins(line: str) -> bool:
    """True when `line` stays in the event before it: a continuation or a blank line."""
    return CONTINUATION.match(line) is not None or _BLANK.match(line) is not None
