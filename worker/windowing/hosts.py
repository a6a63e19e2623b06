"""The host of a syslog line's header, RFC 5424 or RFC 3164, read line by line: an unkeyed record's window key.

    host_of(line) -> the host name of `<PRI>1 TIMESTAMP HOST ...` (RFC 5424) or `[<PRI>]Mmm dd hh:mm:ss HOST ...`
                     / `[<PRI>]YYYY-MM-DDThh:mm:ss... HOST ...` (RFC 3164 and its ISO-stamped variant), else None

A line without such a header (a continuation, an application's own format) has no host; a 3164 line
without a host field (`Oct 11 22:14:15 sshd[7]: ...`) has none either: the word after the time must be
followed by a space, not by `[` or `:` as a program tag is, and it is no level word (`2024-05-01T12:00:00Z
ERROR db down` is an application's line with no host).
"""

from __future__ import annotations

import re

from worker.messages.levels import SPELLINGS

_RFC5424 = re.compile(r"<\d{1,3}>\d{1,2} \S+ (?P<host>[^\s-]\S*) ")
_RFC3164 = re.compile(r"(?:<\d{1,3}>)?(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) "
                      r"(?P<host>[A-Za-z0-9][\w.-]*) ")


def host_of(line: str) -> str | None:
    m = _RFC5424.match(line) or _RFC3164.match(line)
    if m is None or m.group("host").lower() in SPELLINGS:
        return None
    return m.group("host")
