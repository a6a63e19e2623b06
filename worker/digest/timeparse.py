"""Timestamps of log lines: the first and last of a document (its time span).

Forms read (each anywhere near a line's start): ISO 8601 / RFC 3339 (`T` or a
space, `-` or `/` in the date, fractions, `Z` or an offset), RFC 3164 syslog
`Mon DD HH:MM:SS` (no year: written as ISO 8601's yearless `--MM-DDTHH:MM:SS`),
Apache `[01/Dec/2026:10:00:00 +0000]`, epoch seconds (10 digits, optional
fraction) and milliseconds (13 digits) as the first token, and the compact
`yyMMdd HHmmss` of HDFS-style logs. Times are kept as written when they carry
no zone, converted to UTC (`Z`) when they do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
SCAN_LINES = 50   # lines read from each end for the first and last timestamp
HEAD_CHARS = 64   # a timestamp must start within this many characters of a line's start

_ISO = re.compile(r"(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                  r"(Z|[+-]\d{2}:?\d{2})?")
_SYSLOG = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(\d{1,2}) "
                     r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\b")
_APACHE = re.compile(r"(\d{2})/(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/(\d{4}):(\d{2}):(\d{2}):(\d{2})"
                     r"(?: ([+-]\d{4}))?")
_EPOCH = re.compile(r"^\[?(\d{13}|\d{10}(?:\.\d{1,6})?)(?![\d.])")
_COMPACT = re.compile(r"^(\d{2})(\d{2})(\d{2}) (\d{2})(\d{2})(\d{2})\b")
# every form above holds one of these: one search rejects most lines without a timestamp
# (ASCII digits: the templater tests the same in C++, line_clock)
_CANDIDATE = re.compile(r"\d:\d{2}:\d{2}|^\[?\d{10}|^\d{6} \d{6}", re.ASCII)


@dataclass(frozen=True)
class Stamp:
    text: str            # ISO 8601 (yearless `--MM-DDT...` for syslog)
    form: str            # iso8601 | rfc3164 | apache | epoch_s | epoch_ms | compact
    seconds: float       # for spans: seconds since the epoch (syslog: since the start of year 2000)


def _fraction(frac: str | None) -> int:
    return int((frac or "0")[:6].ljust(6, "0"))


def _zone(z: str | None) -> timezone | None:
    if not z:
        return None
    if z == "Z":
        return timezone.utc
    sign = -1 if z[0] == "-" else 1
    digits = z[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


def _iso(dt: datetime) -> str:
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    text = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    if dt.microsecond:
        text += f".{dt.microsecond // 1000:03d}" if dt.microsecond % 1000 == 0 else f".{dt.microsecond:06d}"
    return text + ("Z" if dt.tzinfo is not None else "")


def _stamp(dt: datetime, form: str) -> Stamp:
    secs = dt.timestamp() if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc).timestamp()
    return Stamp(_iso(dt), form, secs)


def parse_line(line: str) -> Stamp | None:
    """The timestamp near the start of a line, or None."""
    head = line[:HEAD_CHARS + 40]
    if _CANDIDATE.search(head) is None:
        return None
    try:
        return _parse(head)
    except ValueError:  # a date-shaped string that is no date (month 13): not a timestamp
        return None


def _parse(head: str) -> Stamp | None:
    m = _ISO.search(head)
    if m and m.start() < HEAD_CHARS:
        y, mo, d, h, mi, s, frac, z = m.groups()
        dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), _fraction(frac), tzinfo=_zone(z))
        return _stamp(dt, "iso8601")
    m = _APACHE.search(head)
    if m and m.start() < HEAD_CHARS:
        d, mon, y, h, mi, s, z = m.groups()
        dt = datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), tzinfo=_zone(z))
        return _stamp(dt, "apache")
    m = _COMPACT.match(head)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups())
        return _stamp(datetime(2000 + y, mo, d, h, mi, s), "compact")
    m = _EPOCH.match(head)
    if m:
        raw = m.group(1)
        ms = len(raw) == 13
        dt = datetime.fromtimestamp(int(raw) / 1000 if ms else float(raw), tz=timezone.utc)
        return _stamp(dt, "epoch_ms" if ms else "epoch_s")
    m = _SYSLOG.search(head)
    if m and m.start() < HEAD_CHARS:
        mon, d, h, mi, s, frac = m.groups()
        dt = datetime(2000, MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac))
        return Stamp("--" + _iso(dt)[5:], "rfc3164", dt.replace(tzinfo=timezone.utc).timestamp())
    return None


def span(lines: list[str], clock: Sequence[int] | None = None) -> tuple[Stamp | None, Stamp | None]:
    """(first, last) timestamp of a document: the first found from each end, SCAN_LINES deep.

    clock: per line, 0 where the line cannot hold a timestamp (the templater's line_clock, made in its
    pass by the same test as _CANDIDATE): those lines are not parsed.
    """
    n = len(lines)
    if clock is None:
        clock = [1] * n
    head = range(min(n, SCAN_LINES))
    first = next((s for s in (parse_line(lines[i]) for i in head if clock[i]) if s is not None), None)
    if first is None:
        return None, None
    tail = range(n - 1, max(-1, n - 1 - SCAN_LINES), -1)
    last = next((s for s in (parse_line(lines[i]) for i in tail if clock[i]) if s is not None), first)
    return first, last
