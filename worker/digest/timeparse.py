"""Timestamps of log lines: what a timestamp is and how it is read (the one owner of both).

    SHAPES, shapes(mark)  -> the regular-expression source of every timestamp shape (what the header
                             grammar, worker/digest/header.py, finds in a line's header)
    stamp_of(text)        -> Stamp of one timestamp's text, or None (an impossible date is none)
    parse_line(line)      -> Stamp of the timestamp near a line's start, or None
    span(lines, clock)    -> (first, last) timestamp of a document, read from each end

Shapes (each ending where the time does): ISO 8601 / RFC 3339 (`T`, a space or a tab; `-` `/` `.`
in the date; `.` `,` `:` fractions; `Z`, offsets, zone names), `yyyy-MM-dd-HH.mm.ss.ffffff`, ctime
`Sun Dec 04 04:47:44 2005`, `Dec 16 2019 15:09:49`, RFC 3164 `Mon dd HH:mm:ss`, day-month names
(`17-Feb-2018 23:06:56`, the access log's `01/Dec/2026:10:00:01 +0100`, `14 Nov 07:01:22`, `09-Jan
19:54`, `Mar-18 21:41:15`), numeric day- or month-first dates (`19-06-2019 10:00:00`), yearless
`MM-dd`/`MM/dd`/`MM.dd HH:mm:ss` (and klog's `MMDD`), `yyMMdd HHmmss`, `yyyyMMdd-HH:mm:ss:SSS`,
`yyyyMMdd HH:mm:ss`, year-first month names (`2023 Jan 12 10:01:22`), `yyyyMMdd:HHmmss.SSS`, a 12-hour clock after a numeric
date (`1/12/2023 10:01:22 AM`), epoch seconds (10 digits, fraction optional) and milliseconds (13 digits), and
a time of day alone (found, never read: it names no day). A time with a zone is converted to UTC
(`Z`); one without, or with a zone name other than UTC/GMT, is kept as written; a time without a
year is written yearless (`--MM-DDTHH:MM:SS`, seconds counted from the start of 2000).

parse_line finds a timestamp near a line's start with the same shapes (epoch and `yyMMdd HHmmss` as
the first token; ISO 8601 and day-month names within HEAD_CHARS; else RFC 3164) and reads it with
stamp_of; the header grammar reads every shape at the header's place.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
SCAN_LINES = 50   # lines read from each end for the first and last timestamp
HEAD_CHARS = 64   # a timestamp must start within this many characters of a line's start

# ---- shapes ------------------------------------------------------------------------------------------
MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"
_FRAC = r"(?:[.,]\d{1,9}|:\d{3}(?!\d))?"
_ZONES = "UTC|GMT|CET|CEST|EET|EEST|WET|WEST|MSK|IST|JST|KST|HKT|SGT|AEST|AEDT|EST|EDT|CST|CDT|MST|MDT|PST|PDT|BST"
_ZONE = rf"(?:\s?(?:Z|[+-]\d{{2}}:?\d{{2}}(?!\d)|{_ZONES})(?![\w]|:\d{{2}}:))?"
_HMS = r"\d{1,2}:\d{2}:\d{2}"
SHAPES = (
    rf"\d{{4}}-\d{{2}}-\d{{2}}T{_HMS}{_FRAC}{_ZONE}",                                   # RFC 3339 (syslog writes it)
    rf"\d{{4}}[-/.]\d{{2}}[-/.]\d{{2}}(?:T|\s{{1,2}}|\t){_HMS}{_FRAC}{_ZONE}",        # ISO 8601 and friends
    r"\d{4}-\d{2}-\d{2}-\d{2}\.\d{2}\.\d{2}\.\d{1,6}",                              # 2005-06-03-15.42.50.675872
    rf"{_DAY} {MON} {{1,2}}\d{{1,2}} {_HMS}{_FRAC}(?: (?:{_ZONES}))? \d{{4}}",         # ctime: Mon Aug 31 09:30:48 2015
    rf"{MON} {{1,2}}\d{{1,2}},? \d{{4}},? {_HMS}{_FRAC}(?: [AP]M)?{_ZONE}",           # Dec 16 2019 15:09:49, Dec 30, 2020 ...
    rf"{MON} {{1,2}}\d{{1,2}} {_HMS}{_FRAC}{_ZONE}",                                   # RFC 3164
    rf"\d{{1,2}}[-/ ]{MON}[-/ ]\d{{4}}(?::| |::){_HMS}{_FRAC}{_ZONE}",               # 17-Feb-2018 23:06:56, CLF
    rf"\d{{1,2}} {MON} {_HMS}{_FRAC}",                                                  # 14 Nov 07:01:22.119
    r"\d{1,2}-" + MON + r"(?:-\d{4})? \d{2}:\d{2}(?::\d{2})?",                       # 09-Jan 19:54
    rf"\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}(?:[ ,]\s?|-(?=\d{{2}}:)){_HMS}{_FRAC}(?: [AP]M(?!\w))?{_ZONE}",  # 11/05/18 19:21:00, 1/12/2023 1:02:03 PM
    rf"\d{{2}}[-/.]\d{{2}} {_HMS}{_FRAC}",                                              # MM-dd, MM/dd, MM.dd
    r"\d{6}\s{1,2}(?:\d{6}|" + _HMS + r")(?![\d:])",                                     # yyMMdd HHmmss, 171113 14:14:20
    r"\d{8}-\d{1,2}:\d{1,2}:\d{1,2}(?::\d{1,3})?",                                    # yyyyMMdd-HH:mm:ss:SSS
    rf"\d{{8}}[ T]{_HMS}{_FRAC}{_ZONE}",                                               # 20260327 11:34:21.908
    rf"{MON}-\d{{1,2}} {_HMS}{_FRAC}",                                                  # Mar-18 21:41:15.684
    r"\d{13}(?![\d.]|:\S)|\d{10}(?:\.\d{1,9})?(?![\d.]|:\S)",                       # epoch ms / s (`1706774400: `)
    rf"\d{{4}} {MON} {{1,2}}\d{{1,2}} {_HMS}{_FRAC}{_ZONE}",                          # 2023 Jan 12 10:01:22 (NX-OS)
    r"\d{8}:\d{6}(?:\.\d{1,6})?(?![\d.:])",                                           # 20230112:100122.123
    r"\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?![\d:])|\d{1,2}:\d{2}[AP]M(?!\w)",              # a time of day alone (`3:04PM`)
)
SYSLOG_SHAPES = (0, 5, 8, 16)   # the shapes syslog writes: RFC 3339, RFC 3164, dd-Mon hh:mm, yyyy Mon dd hh:mm:ss
BARE_HOST_SHAPES = (5, 16)       # those after which a host stands before an untagged message (RFC 3164's)
DATE_ONLY = r"\d{4}[-.]\d{2}[-.]\d{2}"


def shapes(mark: str = "") -> str:
    """Every shape as one alternation (the syslog ones setting the empty group `mark`N); those that open
    with a digit and those that open with a name behind one look at the first character each (what keeps
    a miss cheap)."""
    parts = [rf"{p}(?P<{mark}{i}>)" if mark and i in SYSLOG_SHAPES else p for i, p in enumerate(SHAPES)]
    digit = [p for p, raw in zip(parts, SHAPES) if raw[:2] == "\\d"]
    named = [p for p, raw in zip(parts, SHAPES) if raw[:2] != "\\d"]
    return f"(?=\\d)(?:{'|'.join(digit)})|(?=[A-Z])(?:{'|'.join(named)})"


# ---- reading one timestamp's text --------------------------------------------------------------------
class Stamp(NamedTuple):
    text: str            # ISO 8601 (yearless `--MM-DDT...` where the log gives no year)
    form: str            # iso8601 | rfc3164 | apache | epoch_s | epoch_ms | compact | ... (stamp_of)
    seconds: float       # for spans: seconds since the epoch (yearless: since the start of year 2000)


_new_stamp = functools.partial(tuple.__new__, Stamp)   # a Stamp of (text, form, seconds), without the NamedTuple's
                                                       # own constructor (a Python function)


_ZONE_TEXT = rf"\s?(Z|[+-]\d{{2}}:?\d{{2}}|{_ZONES})?$"
_FORMS = (
    ("iso8601", re.compile(r"(\d{4})[-/.](\d{2})[-/.](\d{2})(?:[T\t]| {1,2})(\d{1,2}):(\d{2}):(\d{2})"
                           r"(?:[.,:](\d{1,9}))?" + _ZONE_TEXT)),
    ("iso8601", re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})\.(\d{2})\.(\d{2})\.(\d{1,6})()$")),
    ("yy/MM/dd", re.compile(r"(\d{2})/(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?()$")),
    ("compact", re.compile(r"(\d{2})(\d{2})(\d{2}) {1,2}(\d{2}):?(\d{2}):?(\d{2})()()$")),
    ("yyyyMMdd", re.compile(r"(\d{4})(\d{2})(\d{2})-(\d{1,2}):(\d{1,2}):(\d{1,2})(?::(\d{1,3}))?()$")),
    ("yyyyMMdd", re.compile(r"(\d{4})(\d{2})(\d{2}):(\d{2})(\d{2})(\d{2})(?:\.(\d{1,6}))?()$")),
    ("iso8601", re.compile(r"(\d{4})(\d{2})(\d{2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?" + _ZONE_TEXT)),
)
# month names: day first (`17-Feb-2018 23:06:56.326`, `8-Mar-2018::14:09:27`, `29/Aug/2023 22:02:58`),
# month first (`Dec 30, 2020 11:30:40 AM`, `Dec 16 2019 15:09:49.652-0500`), and yearless (`14 Nov 07:01:22.119`,
# `09-Jan 19:54`, `Mar-18 21:41:15.684`)
_DMY = re.compile(r"(\d{1,2})[-/ ]([A-Z][a-z]{2})[a-z]*\.?[-/ ](\d{4})(?:::|[: ])(\d{1,2}):(\d{2}):(\d{2})"
                  r"(?:[.,](\d{1,9}))?" + _ZONE_TEXT)
_MDY = re.compile(r"([A-Z][a-z]{2})[a-z]*\.? {1,2}(\d{1,2}),? (\d{4}),? (\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                  r"(?: ([AP]M))?" + _ZONE_TEXT)
_DM = re.compile(r"(?:(\d{1,2})[- ]([A-Z][a-z]{2})|([A-Z][a-z]{2})-(\d{1,2})) (\d{1,2}):(\d{2})(?::(\d{2}))?"
                 r"(?:[.,](\d{1,9}))?$")
_YEARLESS = re.compile(r"(\d{2})[-/.]?(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?$")
_SYSLOG = re.compile(r"(?:<\d+>)?([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d{1,2}):(\d{2}):(\d{2})(?:[.,:](\d{1,9}))?" + _ZONE_TEXT)
_CTIME = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) (\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? (\d{4})$")
EPOCH = re.compile(r"(\d{13}|\d{10}(?:\.\d{1,6})?)$")
CLF = re.compile(r"(\d{2})/([A-Z][a-z]{2})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})$")
# 19-06-2019 10:00:00, 11/05/2018 19:21:00.123, 19.06.2019 10:00: day or month first, the year last
_NUMERIC_DATE = re.compile(r"(\d{1,2})([-/.])(\d{1,2})\2(\d{4}|\d{2})[ T-](\d{1,2}):(\d{2})(?::(\d{2}))?(?:[.,:](\d{1,9}))?"
                           r"(?: ([AP]M))?" + _ZONE_TEXT)
_YMD_NAMED = re.compile(r"(\d{4}) ([A-Z][a-z]{2})[a-z]*\.? {1,2}(\d{1,2}) (\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?" + _ZONE_TEXT)


def _fraction(frac: str | None) -> int:
    return int(frac[:6].ljust(6, "0")) if frac else 0


def _zone(z: str | None) -> timezone | None:
    """An offset or `Z`/UTC/GMT as a timezone; no zone, or another zone name, is none (kept as written)."""
    if not z:
        return None
    if z in ("Z", "UTC", "GMT"):
        return timezone.utc
    if z[0] not in "+-":
        return None
    sign = -1 if z[0] == "-" else 1
    digits = z[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


def _iso(dt: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS`, milliseconds where the fraction has no finer digit, else microseconds; a time
    with a zone in UTC, `Z`."""
    zone = ""
    if dt.tzinfo is not None:
        dt, zone = dt.astimezone(timezone.utc), "Z"
    text = dt.isoformat()    # microseconds where there are any, else seconds (`timespec` costs more than a slice)
    if zone:
        text = text[:-6]     # UTC's `+00:00` (cheaper than a copy of the time without its zone)
    us = dt.microsecond
    return (text[:-3] if us and not us % 1000 else text) + zone


_EPOCH = datetime(1970, 1, 1)   # a time without a zone counts as UTC: its seconds from this (what an aware
                                # time's timestamp() computes, its delta from the epoch over 10**6 microseconds)


def _stamp(dt: datetime, form: str) -> Stamp:
    secs = dt.timestamp() if dt.tzinfo is not None else (dt - _EPOCH).total_seconds()
    return _new_stamp((_iso(dt), form, secs))


def _yearless(dt: datetime, form: str) -> Stamp:
    return _new_stamp(("--" + _iso(dt)[5:], form, (dt - _EPOCH).total_seconds()))


@functools.lru_cache(maxsize=4096)   # a stamp is read again for the span and for each failure it opens or ends
def stamp_of(text: str) -> Stamp | None:
    """The time a timestamp's text names, or None (an impossible date is none): the first of _STEPS whose pattern
    matches the text, read. No pattern of _STEPS tells one ASCII digit from another (tests/digest/test_timeparse.py
    checks it), so every text of one digit key (its digits written 0) matches the same first step: the step is
    kept per key (step_of) and only that one is tried again."""
    t = text.strip().strip("[]\"")
    try:
        i = step_of(t)
        if i == len(_STEPS):
            return None
        rx, read = _STEPS[i]
        return read(rx.match(t))
    except (ValueError, KeyError, OverflowError):
        return None


def form_of(text: str) -> int:
    """Which form a timestamp's text is written in (an index into the forms stamp_of tries; one past them: none),
    the same for every text of its digit key: a text with its digits written 0 reads as the text does."""
    return step_of(text.strip().strip("[]\""))


def step_of(t: str) -> int:
    """The index of the first of _STEPS whose pattern matches `t` (len(_STEPS): none), the same for every text of
    its digit key (kept per key): which form a time is written in, read without reading its value."""
    key = t.encode("utf-8", "surrogatepass").translate(_ZERO)
    i = _STEP_OF.get(key)
    if i is None:
        if len(_STEP_OF) >= 4096:
            _STEP_OF.clear()
        i = _STEP_OF[key] = next((i for i, (rx, _) in enumerate(_STEPS) if rx.match(t)), len(_STEPS))
    return i


def _numeric(form: str, m: re.Match) -> Stamp:
    y, mo, d, h, mi, s, frac, z = m.groups()
    if form == "yyyyMMdd" and frac:
        frac = frac.zfill(3)          # milliseconds written without leading zeros
    year = int(y) + (2000 if len(y) == 2 else 0)
    return _stamp(datetime(year, int(mo), int(d), int(h), int(mi), int(s), _fraction(frac), _zone(z)), form)


def _clf(m: re.Match) -> Stamp:
    d, mon, y, h, mi, s, z = m.groups()
    return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), tzinfo=_zone(z)), "apache")


def _ymd_named(m: re.Match) -> Stamp:
    y, mon, d, h, mi, s, frac, z = m.groups()
    return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac), _zone(z)),
                  "year_month_day")


def _day_month(m: re.Match) -> Stamp:
    d, mon, mon2, d2, h, mi, sec, frac = m.groups()
    return _yearless(datetime(2000, MONTHS[(mon or mon2).lower()], int(d or d2), int(h), int(mi), int(sec or 0),
                              _fraction(frac)), "yearless_month")


def _epoch(m: re.Match) -> Stamp:
    ms = len(m.group(1)) == 13 and m.group(1).isdigit()    # 13 digits; `1927463012.25` is seconds
    secs = int(m.group(1)) / 1000 if ms else float(m.group(1))
    return _stamp(datetime.fromtimestamp(secs, tz=timezone.utc), "epoch_ms" if ms else "epoch_s")


def _ctime(m: re.Match) -> Stamp:
    mon, d, h, mi, s, frac, y = m.groups()
    return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac)), "ctime")


def _syslog(m: re.Match) -> Stamp:
    mon, d, h, mi, s, frac, _z = m.groups()
    return _yearless(datetime(2000, MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac)), "rfc3164")


def _yearless_numeric(m: re.Match) -> Stamp:
    mo, d, h, mi, s, frac = m.groups()
    return _yearless(datetime(2000, int(mo), int(d), int(h), int(mi), int(s), _fraction(frac)), "yearless")


def _named(m: re.Match) -> Stamp:
    """A `_DMY` or `_MDY` match as a Stamp."""
    g = m.groups()
    if m.re is _DMY:
        d, mon, y, h, mi, sec, frac, z = g
        ampm, form = None, "day_month"
    else:
        mon, d, y, h, mi, sec, frac, ampm, z = g
        form = "month_day"
    hour = int(h) % 12 + (12 if ampm == "PM" else 0) if ampm else int(h)
    return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), hour, int(mi), int(sec), _fraction(frac), _zone(z)),
                  form)


def _numeric_date(m: re.Match) -> Stamp:
    """A field over 12 is the day; with neither over 12, `/` is read month first (the US order) and `-` or `.`
    day first (the order of most other locales)."""
    a, sep, b, y, h, mi, sec, frac, ampm, z = m.groups()
    hour = int(h) % 12 + (12 if ampm == "PM" else 0) if ampm else int(h)
    day_first = int(a) > 12 or (int(b) <= 12 and sep != "/")
    d, mo = (a, b) if day_first else (b, a)
    year = int(y) + (2000 if len(y) == 2 else 0)
    return _stamp(datetime(year, int(mo), int(d), hour, int(mi), int(sec or 0), _fraction(frac), _zone(z)),
                  "day_first" if day_first else "month_first")


# the forms in the order they are tried: the first whose pattern matches reads the text
_STEPS = (*((rx, functools.partial(_numeric, form)) for form, rx in _FORMS), (CLF, _clf), (_DMY, _named), (_MDY, _named),
          (_NUMERIC_DATE, _numeric_date), (_YMD_NAMED, _ymd_named), (_DM, _day_month), (EPOCH, _epoch), (_CTIME, _ctime),
          (_SYSLOG, _syslog), (_YEARLESS, _yearless_numeric))
_ZERO = bytes.maketrans(b"123456789", b"0" * 9)   # on UTF-8 bytes (an ASCII digit is never inside a character)
_STEP_OF: dict[bytes, int] = {}     # per digit key of a timestamp's text: the index of its step (len(_STEPS): none)


# ---- finding the timestamp near a line's start -------------------------------------------------------
# epoch and yyMMdd HHmmss as the first token (a number later in a line is no time), ISO 8601 and day-month
# names (the access log's) anywhere in the head; else RFC 3164 (a time with its year wins over one without)
_LINE = re.compile(rf"^\[?(?:{SHAPES[15]}|\d{{6}} \d{{6}}\b)|(?<!\w)(?:{SHAPES[0]}|{SHAPES[1]}|{SHAPES[6]})")
_LINE_YEARLESS = re.compile(rf"(?<!\w){SHAPES[5]}")
# every shape parse_line finds holds one of these: one search rejects most lines without a timestamp
# (ASCII digits: the templater tests the same in C++, line_clock)
_CANDIDATE = re.compile(r"\d:\d{2}:\d{2}|^\[?\d{10}|^\d{6} \d{6}", re.ASCII)


def parse_line(line: str) -> Stamp | None:
    """The timestamp near the start of a line (the module docstring), or None."""
    head = line[:HEAD_CHARS + 40]
    if _CANDIDATE.search(head) is None:
        return None
    m = _LINE.search(head)
    if m is None or m.start() >= HEAD_CHARS:
        m = _LINE_YEARLESS.search(head)
        if m is None or m.start() >= HEAD_CHARS:
            return None
    return stamp_of(m.group().lstrip("["))


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
