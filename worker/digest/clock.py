"""A document's true time span, from the timestamps its format layer read (worker/digest/formats.py).

    sort_keys(stamps)        -> [L] strings that sort like the times ("" for none)
    stamp_of(text)           -> Stamp of one header timestamp (any form below), or None
    true_span(stamps, keys)  -> TrueSpan: earliest and latest (never inverted), lines out of order

Forms: ISO 8601 / RFC 3339 (`T` or space, `-` `/` `.` in the date, `.` `,` `:` fractions, `Z`,
offsets, `UTC`), `yyyy-MM-dd-HH.mm.ss.ffffff`, `yy/MM/dd HH:mm:ss`, yearless `MM-dd`/`MM/dd`/`MM.dd
HH:mm:ss[.SSS]` and klog's `MMDD HH:mm:ss.ffffff`, `yyMMdd HHmmss`, `yyyyMMdd-HH:mm:ss:SSS`, RFC 3164
`Mon dd HH:mm:ss`, `Sun Dec 04 04:47:44 2005`, the access log's `01/Dec/2026:10:00:01 +0100`, epoch seconds (10 digits, fraction optional) and
milliseconds (13 digits). Only the earliest and latest lines (and each failure's first and last) are
parsed into dates; the rest are only compared, by sort keys made without parsing.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import itemgetter, lt

from worker.digest.timeparse import MONTHS, Stamp, _fraction, _iso, _stamp, _zone

_DIGITS = str.maketrans("", "", "".join(chr(c) for c in range(128) if not chr(c).isdigit()))
_MON_KEY = {m.capitalize(): f"{i:02d}" for m, i in MONTHS.items()}
_GROUPS = re.compile(r"\d+")

_FORMS = (
    ("iso8601", re.compile(r"(\d{4})[-/.](\d{2})[-/.](\d{2})(?:[T\t]| {1,2})(\d{1,2}):(\d{2}):(\d{2})"
                           r"(?:[.,:](\d{1,9}))?\s?(Z|[+-]\d{2}:?\d{2}|UTC|GMT)?$")),
    ("iso8601", re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})\.(\d{2})\.(\d{2})\.(\d{1,6})()$")),
    ("yy/MM/dd", re.compile(r"(\d{2})/(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?()$")),
    ("yyMMdd", re.compile(r"(\d{2})(\d{2})(\d{2}) (\d{2})(\d{2})(\d{2})()()$")),
    ("yyyyMMdd", re.compile(r"(\d{4})(\d{2})(\d{2})-(\d{1,2}):(\d{1,2}):(\d{1,2})(?::(\d{1,3}))?()$")),
    ("iso8601", re.compile(r"(\d{4})(\d{2})(\d{2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                           r"\s?(Z|[+-]\d{2}:?\d{2}|UTC|GMT)?$")),
)
_ZONE_TEXT = r"\s?(Z|[+-]\d{2}:?\d{2}|UTC|GMT)?$"
# month names: day first (`17-Feb-2018 23:06:56.326`, `8-Mar-2018::14:09:27`, `29/Aug/2023 22:02:58`),
# month first (`Dec 30, 2020 11:30:40 AM`, `Dec 16 2019 15:09:49.652-0500`), and yearless (`14 Nov 07:01:22.119`,
# `09-Jan 19:54`, `Mar-18 21:41:15.684`)
_DMY = re.compile(r"(\d{1,2})[-/ ]([A-Z][a-z]{2})[a-z]*\.?[-/ ](\d{4})(?:::|[: ])(\d{1,2}):(\d{2}):(\d{2})"
                  r"(?:[.,](\d{1,9}))?" + _ZONE_TEXT)
_MDY = re.compile(r"([A-Z][a-z]{2})[a-z]*\.? {1,2}(\d{1,2}),? (\d{4}),? (\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                  r"(?: ([AP]M))?" + _ZONE_TEXT)
_DM = re.compile(r"(?:(\d{1,2})[- ]([A-Z][a-z]{2})|([A-Z][a-z]{2})-(\d{1,2})) (\d{1,2}):(\d{2})(?::(\d{2}))?"
                 r"(?:[.,](\d{1,9}))?$")
_NAMED_HINT = re.compile(r"\d{1,2}[-/ ][A-Z][a-z]{2}|[A-Z][a-z]{2}[a-z]*\.? {1,2}\d{1,2},? \d{4}|[A-Z][a-z]{2}-\d")
_PARSED_EACH = frozenset({"day_month", "month_day", "yearless_month"})   # sort keys made by parsing each time
_YEARLESS = re.compile(r"(\d{2})[-/.]?(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?$")
_SYSLOG = re.compile(r"(?:<\d+>)?([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")
_CTIME = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) (\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? (\d{4})$")
_EPOCH = re.compile(r"(\d{13}|\d{10}(?:\.\d{1,6})?)$")
_CLF = re.compile(r"(\d{2})/([A-Z][a-z]{2})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})$")


@functools.lru_cache(maxsize=4096)   # a stamp is read again for the span and for each failure it opens or ends
def stamp_of(text: str) -> Stamp | None:
    """The time a header's timestamp text names, or None (an impossible date is none)."""
    t = text.strip().strip("[]\"")
    try:
        return _parse(t)
    except (ValueError, KeyError, OverflowError):
        return None


def _parse(t: str) -> Stamp | None:
    for form, rx in _FORMS:
        m = rx.match(t)
        if m:
            y, mo, d, h, mi, s, frac, z = m.groups()
            if form == "yyyyMMdd" and frac:
                frac = frac.zfill(3)          # milliseconds written without leading zeros
            year = int(y) + (2000 if len(y) == 2 else 0)
            zone = timezone.utc if z in ("UTC", "GMT") else _zone(z)
            return _stamp(datetime(year, int(mo), int(d), int(h), int(mi), int(s), _fraction(frac), zone), form)
    m = _CLF.match(t)
    if m:
        d, mon, y, h, mi, s, z = m.groups()
        return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), tzinfo=_zone(z)),
                      "apache")
    m = _DMY.match(t) or _MDY.match(t)
    if m:
        return _named(m)
    m = _NUMERIC_DATE.match(t)
    if m:
        return _numeric_date(m)
    m = _DM.match(t)
    if m:
        d, mon, mon2, d2, h, mi, sec, frac = m.groups()
        return _yearless(datetime(2000, MONTHS[(mon or mon2).lower()], int(d or d2), int(h), int(mi), int(sec or 0),
                                  _fraction(frac)), "yearless_month")
    m = _EPOCH.match(t)
    if m:
        ms = len(m.group(1)) == 13
        secs = int(m.group(1)) / 1000 if ms else float(m.group(1))
        return _stamp(datetime.fromtimestamp(secs, tz=timezone.utc), "epoch_ms" if ms else "epoch_s")
    m = _CTIME.match(t)
    if m:
        mon, d, h, mi, s, frac, y = m.groups()
        return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac)), "ctime")
    m = _SYSLOG.match(t)
    if m:
        mon, d, h, mi, s, frac = m.groups()
        return _yearless(datetime(2000, MONTHS[mon.lower()], int(d), int(h), int(mi), int(s), _fraction(frac)),
                         "rfc3164")
    m = _YEARLESS.match(t)
    if m:
        mo, d, h, mi, s, frac = m.groups()
        return _yearless(datetime(2000, int(mo), int(d), int(h), int(mi), int(s), _fraction(frac)), "yearless")
    return None


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
    zone = timezone.utc if z in ("UTC", "GMT") else _zone(z)
    return _stamp(datetime(int(y), MONTHS[mon.lower()], int(d), hour, int(mi), int(sec), _fraction(frac), zone), form)


def _yearless(dt: datetime, form: str) -> Stamp:
    return Stamp("--" + _iso(dt)[5:], form, dt.replace(tzinfo=timezone.utc).timestamp())


def sort_keys(stamps: list[str]) -> list[str]:
    """[L] a key per timestamp text that sorts as the times do within one document ("" where none)."""
    sample = next((s for s in stamps if s), "")
    if not sample:
        return stamps
    if _NAMED_HINT.match(sample):                                  # month names: each time parsed
        first = stamp_of(sample)
        if first is not None and first.form in _PARSED_EACH:
            return [_clf_key(s) if s else "" for s in stamps]
    if sample[:3] in _MON_KEY or sample.lstrip("<0123456789>")[:3] in _MON_KEY:   # Mon dd HH:MM:SS
        return _syslog_keys(stamps)
    if sample[:3].isalpha():                                        # Sun Dec 04 04:47:44 2005
        return [(s[-4:] + _MON_KEY.get(s[4:7], "00") + s[8:-5].translate(_DIGITS)) if s else "" for s in stamps]
    if _CLF.match(sample):                                          # 01/Dec/2026:10:00:01 +0100
        return [_clf_key(s) if s else "" for s in stamps]
    if _EPOCH.match(sample):
        return [f"{float(s):020.6f}" if s else "" for s in stamps]
    if _NUMERIC_DATE_NOT_YEAR_FIRST.match(sample):                  # 19-06-2019 10:00:00, 11/05/2018 19:21
        return [_clf_key(s) if s else "" for s in stamps]
    widths = set(map(len, stamps))
    widths.discard(0)
    if len(widths) == 1 and sample[:4].isdigit():  # fixed width, the year first: the texts sort as the times
        return stamps
    return [_padded_key(s) if s else "" for s in stamps]


_NUMERIC_DATE_NOT_YEAR_FIRST = re.compile(r"\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b")  # day or month first: parsed
# 19-06-2019 10:00:00, 11/05/2018 19:21:00.123, 19.06.2019 10:00: day or month first, the year last
_NUMERIC_DATE = re.compile(r"(\d{1,2})([-/.])(\d{1,2})\2(\d{4}|\d{2})[ T](\d{1,2}):(\d{2})(?::(\d{2}))?(?:[.,](\d{1,9}))?\Z")


def _numeric_date(m: re.Match) -> Stamp:
    """A field over 12 is the day; with neither over 12, `/` is read month first (the US order) and `-` or `.`
    day first (the order of most other locales)."""
    a, sep, b, y, h, mi, sec, frac = m.groups()
    day_first = int(a) > 12 or (int(b) <= 12 and sep != "/")
    d, mo = (a, b) if day_first else (b, a)
    year = int(y) + (2000 if len(y) == 2 else 0)
    return _stamp(datetime(year, int(mo), int(d), int(h), int(mi), int(sec or 0), _fraction(frac)),
                  "day_first" if day_first else "month_first")


def _clf_key(s: str) -> str:
    st = stamp_of(s)
    return f"{st.seconds:020.3f}" if st is not None else ""


def _syslog_key(s: str) -> str:
    s = s.lstrip("<0123456789>")
    day, _, rest = s[4:].lstrip().partition(" ")
    return _MON_KEY.get(s[:3], "00") + day.zfill(2) + rest.translate(_DIGITS)


_MON_SPACE = frozenset(m + " " for m in _MON_KEY)
_NOT_DIGITS = bytes(c for c in range(256) if not 48 <= c <= 57 and c != 10)   # bytes to delete (\n kept)


def _syslog_keys(stamps: list[str]) -> list[str]:
    """_syslog_key of every stamp, in a few passes over the joined texts when all have one width and start
    with a month name (a space-padded day, as RFC 3164 writes it); line by line otherwise."""
    widths = set(map(len, stamps))
    widths.discard(0)
    heads = set(map(itemgetter(slice(0, 4)), stamps))
    heads.discard("")
    joined = "\n".join(stamps)
    if len(widths) != 1 or not heads <= _MON_SPACE or not joined.isascii():
        return [_syslog_key(s) if s else "" for s in stamps]
    joined = joined.replace("  ", " 0")                      # `Dec  1 10:..` -> `Dec 01 10:..`
    for head in heads:
        joined = joined.replace(head, _MON_KEY[head[:3]])    # -> `1201 10:..`
    return joined.encode().translate(None, _NOT_DIGITS).decode().split("\n")   # -> `1201100...`


def _padded_key(s: str) -> str:
    """Digit groups zero-padded (the last, milliseconds, to 3): `22:16:0:119` sorts after `22:15:59:1`."""
    g = _GROUPS.findall(s)
    return "".join(x.zfill(2) for x in g[:-1]) + (g[-1].zfill(3) if g else "")


@dataclass(frozen=True)
class TrueSpan:
    first: Stamp
    last: Stamp
    first_line: int          # 0-based
    last_line: int
    out_of_order: int        # timestamped lines earlier than the timestamped line before them
    zone: str | None         # "UTC" when the stamps carry a zone (converted to UTC), else None


def true_span(stamps: list[str], keys: list[str]) -> TrueSpan | None:
    """Earliest to latest (by sort key; ties: the earlier line), or None when no line has a time."""
    ks = list(filter(None, keys))
    if not ks:
        return None
    k_lo, k_hi = min(ks), max(ks)
    lo, hi = (k_lo, keys.index(k_lo)), (k_hi, keys.index(k_hi))
    first, last = stamp_of(stamps[lo[1]]), stamp_of(stamps[hi[1]])
    if first is None or last is None:
        return None
    if last.seconds < first.seconds:   # keys and dates disagree (mixed forms): order by the dates
        first, last = last, first
        lo, hi = hi, lo
    out_of_order = sum(map(lt, ks[1:], ks))         # a line earlier than the one before it
    zone = "UTC" if first.text.endswith("Z") else None
    return TrueSpan(first, last, lo[1], hi[1], out_of_order, zone)


def days(seconds: float) -> str:
    """A duration as an on-call engineer reads it: 45 s, 12 min, 3.5 h, 5.6 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"

