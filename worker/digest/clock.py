"""A document's true time span, from the timestamps its format layer read (worker/digest/formats.py).

    sort_keys(stamps, masks) -> [L] strings that sort like the times ("" for none), across forms
    true_span(stamps, keys)  -> TrueSpan: earliest and latest (never inverted), lines out of order

A timestamp's text is read by worker/digest/timeparse.py (stamp_of: every form it names). Only the
earliest and latest lines (and each failure's first and last) are parsed into dates; the rest are
only compared, by sort keys made without parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import itemgetter, lt

from worker.digest.timeparse import CLF, EPOCH, MONTHS, Stamp, form_of, stamp_of

_DIGITS = str.maketrans("", "", "".join(chr(c) for c in range(128) if not chr(c).isdigit()))
_MON_KEY = {m.capitalize(): f"{i:02d}" for m, i in MONTHS.items()}
_GROUPS = re.compile(r"\d+")
_NAMED_HINT = re.compile(r"\d{1,2}[-/ ][A-Z][a-z]{2}|[A-Z][a-z]{2}[a-z]*\.? {1,2}\d{1,2},? \d{4}|[A-Z][a-z]{2}-\d")
_PARSED_EACH = frozenset({"day_month", "month_day", "yearless_month"})   # sort keys made by parsing each time


def sort_keys(stamps: list[str], masks: set[str] | None = None) -> list[str]:
    """[L] a key per timestamp text that sorts as the times do within one document ("" where none).

    A document's stamps of one form get keys made without parsing, by a scheme chosen from its first stamp; a
    document mixing forms (lines of several systems, an epoch beside a syslog time) gets its stamps' seconds
    (_mixed_keys). `masks`: the stamps' distinct digit masks where the caller has them (_forms)."""
    sample = next((s for s in stamps if s), "")
    if not sample:
        return stamps
    if _forms(stamps, masks) > 1:
        return _mixed_keys(stamps)
    if _NAMED_HINT.match(sample):                                  # month names: each time parsed
        first = stamp_of(sample)
        if first is not None and first.form in _PARSED_EACH:
            return [_clf_key(s) if s else "" for s in stamps]
    if sample[:3] in _MON_KEY or sample.lstrip("<0123456789>")[:3] in _MON_KEY:   # Mon dd HH:MM:SS
        return _syslog_keys(stamps)
    if sample[:3].isalpha():                                        # Sun Dec 04 04:47:44 2005
        return _ctime_keys(stamps)
    if CLF.match(sample):                                          # 01/Dec/2026:10:00:01 +0100
        return [_clf_key(s) if s else "" for s in stamps]
    if EPOCH.match(sample):
        return [_epoch_key(s) if s else "" for s in stamps]
    if _NUMERIC_DATE_NOT_YEAR_FIRST.match(sample):                  # 19-06-2019 10:00:00, 11/05/2018 19:21
        return [_clf_key(s) if s else "" for s in stamps]
    widths = set(map(len, stamps))
    widths.discard(0)
    if len(widths) == 1 and sample[:4].isdigit():  # fixed width, the year first: the texts sort as the times
        return stamps
    return _padded_keys(stamps)


_NUMERIC_DATE_NOT_YEAR_FIRST = re.compile(r"\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b")  # day or month first: parsed


def _forms(stamps: list[str], masks: set[str] | None) -> int:
    """How many forms (timeparse.form_of) the stamps are written in, read from their distinct digit masks (a
    stamp's text with its digits written 0: every text of one mask has one form; most documents have one or a
    few masks). `masks`: the masks where the caller has them (the header rows keep one per line shape)."""
    if masks is None:
        masks = set("\n".join(stamps).encode("utf-8", "surrogatepass").translate(_ZERO).decode("utf-8", "surrogatepass")
                    .split("\n"))
    masks = masks - {""}
    if len(masks) < 2:
        return len(masks)
    return len({form_of(m) for m in masks})


def _mixed_keys(stamps: list[str]) -> list[str]:
    """Keys of stamps of several forms: each stamp's seconds. A time without a year (RFC 3164's) has none to
    place it among dated ones: where dated stamps exist it gets no key (its line has no place in the span)."""
    read = [stamp_of(s) if s else None for s in stamps]
    dated = any(st is not None and not st.text.startswith("--") for st in read)
    return ["" if st is None or dated and st.text.startswith("--") else f"{st.seconds:020.3f}" for st in read]


def _epoch_key(s: str) -> str:
    """Epoch seconds, or milliseconds (13 digits: timeparse's epoch_ms), as seconds."""
    m = EPOCH.match(s.strip().strip("[]\""))
    if m is None:
        return ""
    e = m.group(1)
    return f"{int(e) / 1000:020.6f}" if len(e) == 13 and e.isdigit() else f"{float(e):020.6f}"


def _clf_key(s: str) -> str:
    st = stamp_of(s)
    return f"{st.seconds:020.3f}" if st is not None else ""


def _ctime_key(s: str) -> str:
    """`Sun Dec 04 04:47:44 2005` -> its year, its month and the digits between: `20051204044744`."""
    return s[-4:] + _MON_KEY.get(s[4:7], "00") + s[8:-5].translate(_DIGITS)


def _ctime_keys(stamps: list[str]) -> list[str]:
    """_ctime_key of every stamp ("" for none), the digits between taken in one pass over the joined texts where
    they are ASCII (one translation each otherwise)."""
    mids = "\n".join(s[8:-5] for s in stamps)
    if not mids.isascii():
        return [_ctime_key(s) if s else "" for s in stamps]
    digits = mids.encode().translate(None, _NOT_DIGITS).decode().split("\n")
    return [s[-4:] + _MON_KEY.get(s[4:7], "00") + d if s else "" for s, d in zip(stamps, digits)]


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


_ZERO = bytes.maketrans(b"123456789", b"0" * 9)


def _padded_keys(stamps: list[str]) -> list[str]:
    """_padded_key of every stamp, made over the joined texts (ASCII): a stamp's digit groups are those of its
    mask (its digits written 0), so its key is its digits with the zeros that mask's groups pad to put in
    (`_insertions`, one per distinct mask: most documents have one or a few)."""
    joined = "\n".join(stamps)
    if not joined.isascii():
        return [_padded_key(s) if s else "" for s in stamps]
    data = joined.encode()
    masks = data.translate(_ZERO).split(b"\n")
    digits = data.translate(None, _NOT_DIGITS).decode().split("\n")
    plans = {m: _insertions(m.decode()) for m in set(masks)}
    if not any(plans.values()):
        return digits
    out = []
    for m, d in zip(masks, digits):
        for at, zeros in plans[m]:           # from the right: an insertion moves none of those before it
            d = d[:at] + zeros + d[at:]
        out.append(d)
    return out


def _insertions(mask: str) -> tuple[tuple[int, str], ...]:
    """Where _padded_key puts zeros into a stamp's digits, for stamps of this mask: (place, zeros), last first."""
    widths = [len(g) for g in _GROUPS.findall(mask)]
    out, at = [], 0
    for i, w in enumerate(widths):
        pad = (3 if i == len(widths) - 1 else 2) - w
        if pad > 0:
            out.append((at, "0" * pad))
        at += w
    return tuple(reversed(out))


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

