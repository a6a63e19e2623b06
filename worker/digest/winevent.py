"""Windows event XML (`<Event xmlns=".../win/2004/08/events/event">`, as `wevtutil qe /f:xml` and
Windows Event Forwarding write it): each event's time, level, computer and provider.

    events(lines) -> per line (stamp, level token, level, host, program), or None when the document
                     holds no event

An event's fields go on its first line (`<Event ...>`); its other lines continue it. Level numbers are
Windows' (1 critical, 2 error, 3 warning, 4 information, 5 verbose; 0 is "log always").
"""

from __future__ import annotations

import re

_FIELDS = re.compile(r'<TimeCreated SystemTime="([^"\n]+)"|<Level>(\d+)</Level>|<Computer>([^<\n]*)</Computer>'
                     r'|<Provider Name="([^"\n]+)"')   # a field is one line's text
LEVELS = {"0": "INFO", "1": "CRITICAL", "2": "ERROR", "3": "WARN", "4": "INFO", "5": "TRACE"}


def is_events(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith("<Event ") and "schemas.microsoft.com/win/2004/08/events/event" in head


def events(lines: list[str]) -> list[tuple] | None:
    """Per line (stamp, token, level, host, program): an event's on its first line, "" / None elsewhere."""
    starts = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("<Event ")]
    if not starts:
        return None
    out: list[tuple] = [("", "", None, "", "")] * len(lines)
    for k, at in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        found = ["", "", "", ""]
        for m in _FIELDS.finditer("\n".join(lines[at:end])):
            for j, g in enumerate(m.groups()):
                if g is not None and not found[j]:
                    found[j] = g
        stamp, token, host, program = found
        out[at] = (stamp, token, LEVELS.get(token), host, program)
    return out
