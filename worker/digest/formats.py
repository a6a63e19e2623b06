"""The format layer: what comes before templating.

    read(text) -> Read: the lines cleaned (ANSI/VT escape sequences and other control bytes removed,
                  the text kept) and per line: its message (the header taken off), level, timestamp
                  text, host, whether a header was found and whether it continues the record before it.

A document of JSON lines or logfmt pairs (a quarter of its first 16 non-blank lines) is read as
such: JSON `level`/`severity`/`lvl`/`severityText`/`PRIORITY`/`severityNumber` (OTLP),
`msg`/`message`/`body`/`MESSAGE`, time and host keys; logfmt `level=`/`lvl=`, `ts=`, `msg=`. A
record's message is its message value; its other pairs are its `fields` (the templater reads both:
`Read.texts`); a record without a message value has its pairs as its message. A header's fields
before the message and its trailer (worker/digest/header.py) are no part of the message either, and
the templater reads them too.
Every other line is read by itself by the header grammar (worker/digest/header.py, applied by
worker/digest/header_rows.py): no format is chosen for a document, so a line reads the same in any
document or window, and a document mixing shapes (RFC 5424 and RFC 3164 lines on one topic) reads
each line as what it is. Levels: the level token (worker/messages/levels.py), a syslog PRI (severity = PRI mod 8),
an access log's status (5xx ERROR, 4xx WARN, else INFO). `Read.form` names the commonest header
shape among the lines (rfc5424, rfc3164, access, timestamped, level_first, json, logfmt), None when
no line has a header (the lines are then templated whole).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from worker.digest import header, header_rows, winevent
from worker.messages.levels import from_otlp, from_pri, level_word

SAMPLE_LINES = 16        # lines read to tell a JSON or logfmt document
MIN_SHARE = 0.25         # share of the sampled lines that must be JSON (or logfmt) for the document to be

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # what stays after the sequences (tab, \r, \n kept)
_CONTROL_BYTES = bytes([*range(0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f])   # the same, as UTF-8 bytes (all ASCII)

_ONE_LINE = str.maketrans("\r\n", "  ")
_LOGFMT_KEYS = ("level=", "lvl=", "severity=")     # what a logfmt document's head must hold to be one
_LOGFMT_LEVEL = re.compile(r'(?:^|\s)(?:level|lvl|severity|loglevel)=("?)(\w+)\1(?=\s|$)')
_LOGFMT_MSG = re.compile(r'(?:^|\s)(?:msg|message)=(?:(")((?:[^"\\]|\\.)*)"|()(\S+))')
_LOGFMT_TIME = re.compile(r'(?:^|\s)(?:time|ts|timestamp|t)=("?)([^\s"]+)\1(?=\s|$)')


@dataclass(frozen=True)
class Read:
    form: str | None             # the header format (None: unknown, lines templated whole)
    lines: list[str]             # [L] the lines, control bytes removed (what examples and highlights quote)
    messages: list[str]          # [L] each line without its header (its whole text where none matched)
    levels: list[str | None]     # [L] the parsed level of each line (None: none parsed)
    stamps: list[str]            # [L] the timestamp text of each line's header ("" if none)
    hosts: list[str]             # [L] the host/component of each line's header ("" if none), [] when the form has none
    matched: list[bool]          # [L] a header part (time, level, PRI) was found on this line
    cleaned: int                 # lines whose control bytes were removed
    continued: list[bool] | None = None   # [L] the line continues the record before it (worker/multiline.py);
                                          # None: not read (JSON and logfmt lines)
    tokens: list[str] | None = None       # [L] the level token as written, where a reader keeps it (Windows events)
    fields: list[str] | None = None       # [L] a JSON or logfmt record's other pairs (`k=v ...`, "" where none);
                                          # None: not read (the header grammar's lines)
    bodies: list[str] | None = None       # [L] what the templater reads where it holds more than the message: the
                                          # header's fields and trailer (`[client ..] AH00558: msg (a.b.C)`), a
                                          # record's other pairs after its message; None: the messages
    stamp_masks: set[str] | None = None   # the stamps' distinct texts with their digits written 0, where the reader
                                          # has them (clock.sort_keys reads their forms from them); None: not kept

    @property
    def texts(self) -> list[str]:
        """[L] what the templater reads: `bodies` where set, else the messages."""
        return self.messages if self.bodies is None else self.bodies


def clean(text: str) -> tuple[str, int]:
    """The text without ANSI/VT escape sequences and other control bytes (the text they wrap kept)."""
    if "\x1b" not in text:
        data = text.encode("utf-8", "surrogatepass")      # no control byte inside a multi-byte sequence
        if len(data.translate(None, _CONTROL_BYTES)) == len(data):   # C speed; a regex search costs 3x
            return text, 0
    out = _CONTROL.sub("", _ANSI.sub("", text))
    changed = sum(a != b for a, b in zip(text.split("\n"), out.split("\n")))
    return out, changed


def _sample(lines: list[str]) -> list[str]:
    nonblank = [ln for ln in lines[:SAMPLE_LINES * 4] if ln.strip()]
    return nonblank[:SAMPLE_LINES]


def detect(lines: list[str]) -> str | None:
    """"json" or "logfmt" when that share of a document's sampled lines is in that form, else None
    (the header grammar reads the lines, each on its own)."""
    sample = _sample(lines)
    if not sample:
        return None
    if sum(ln.lstrip().startswith("{") for ln in sample) >= MIN_SHARE * len(sample):
        if sum(_json_row(ln)[0] for ln in sample) >= MIN_SHARE * len(sample):
            return "json"
    if sum(_LOGFMT_LEVEL.search(ln) is not None for ln in sample) >= MIN_SHARE * len(sample):
        if not any(header.HEADER.match(ln).group("ts") for ln in sample[:2]):
            return "logfmt"
    return None


def read(text: str, lines: list[str] | None = None) -> Read:
    """The format layer over one document (see the module docstring)."""
    text, cleaned = clean(text)
    if cleaned or lines is None:
        lines = text.split("\n")
    head = text[:4096]
    maybe = head.lstrip()[:1] == "{" or "\n{" in head or any(k in head for k in _LOGFMT_KEYS)
    form = detect(lines) if maybe else None
    if form == "json":
        return _read_rows(form, lines, [_json_row(ln) for ln in lines], cleaned)
    if form == "logfmt":
        return _read_rows(form, lines, [_logfmt_row(ln) for ln in lines], cleaned)
    if "<Event " in head and winevent.is_events(text):
        return _events(lines, cleaned)
    return _columns(lines, header_rows.columns(text, lines), cleaned)


def _events(lines: list[str], cleaned: int) -> Read:
    rows = winevent.events(lines)
    first = [bool(r[0] or r[1]) for r in rows]
    return Read("windows_event", lines, lines, [r[2] for r in rows], [r[0] for r in rows], [r[3] for r in rows],
                first, cleaned, [not f for f in first], [r[1] for r in rows])


def _columns(lines: list[str], c: header_rows.Columns, cleaned: int) -> Read:
    n = len(lines)
    if not any(c.matched):
        return Read(None, lines, lines, [None] * n, [""] * n, [], [False] * n, cleaned, c.continued)
    levels = c.levels
    stamps = c.stamps
    if c.pris:
        by_pri = {p: from_pri(p) for p in set(c.pris) if p}
        levels = [by_pri[p] if p else lv for p, lv in zip(c.pris, levels)]
    shapes = c.shapes
    shapes.pop("", None)
    hosts = c.hosts
    return Read(shapes.most_common(1)[0][0], lines, c.messages, levels, stamps, hosts, c.matched, cleaned, c.continued,
                bodies=None if c.bodies is c.messages else c.bodies, stamp_masks=c.stamp_masks)


_JSON_LEVEL = ("level", "severity", "lvl", "loglevel", "log.level", "severityText", "severity_text", "levelname",
               "PRIORITY", "s")
_JSON_MSG = ("msg", "message", "body", "Body", "log", "text", "MESSAGE")
_JSON_TIME = ("time", "timestamp", "ts", "@timestamp", "t", "datetime", "timeUnixNano", "time_unix_nano", "asctime")


def _json_row(line: str) -> tuple:
    """(matched, message, level, stamp, host, fields) of a JSON line."""
    s = line.strip()
    if not s.startswith("{"):
        return (False, line, None, "", "", "")
    try:
        obj = orjson.loads(s)
    except orjson.JSONDecodeError:
        return (False, line, None, "", "", "")
    if not isinstance(obj, dict):
        return (False, line, None, "", "", "")
    level = None
    for k in _JSON_LEVEL:
        v = obj.get(k)
        if isinstance(v, str):
            level = level_word(v)
            if level:
                break
        elif isinstance(v, int) and not isinstance(v, bool):
            level = level_word(str(v)) if k != "severity" or v < 8 else from_otlp(v)
            break
    num = obj.get("severityNumber", obj.get("severity_number"))
    if level is None and isinstance(num, int):
        level = from_otlp(num)
    msg = next((obj[k] for k in _JSON_MSG if k in obj), None)
    msg = msg.get("stringValue", msg) if isinstance(msg, dict) else msg
    stamp = next((obj[k] for k in _JSON_TIME if k in obj), "")
    if isinstance(stamp, dict):                   # extended JSON's `{"$date": ...}` (MongoDB)
        stamp = stamp.get("$date", "")
    stamp = str(stamp) if isinstance(stamp, (str, int, float)) else ""
    if len(stamp) == 19 and stamp.isdigit():  # unix nanoseconds
        stamp = stamp[:13]
    host = next((obj[k] for k in ("host", "hostname", "_HOSTNAME", "service", "logger")   # a `caller` is a source place
                 if isinstance(obj.get(k), str)), "")
    used = set(_JSON_LEVEL) | set(_JSON_MSG) | set(_JSON_TIME) | {"severityNumber", "severity_number"}
    rest = " ".join(f"{k}={_scalar(v)}" for k, v in obj.items() if k not in used and k[:1] != "_")  # `_X`: journald's
    text = str(msg).strip() if msg is not None else ""
    parts = (text, rest, stamp, host)
    if any("\n" in p or "\r" in p for p in parts):      # a record is one line: its values' breaks are spaces
        text, rest, stamp, host = (p.translate(_ONE_LINE) for p in parts)
    if not text:                                  # no message: the pairs are the message
        return (True, rest or s, level, stamp, host, "")
    return (True, text, level, stamp, host, rest)


def _scalar(v) -> str:
    if isinstance(v, str):
        return v if v and " " not in v else orjson.dumps(v).decode()
    return orjson.dumps(v).decode()


def _logfmt_row(line: str) -> tuple:
    """(matched, message, level, stamp, host, fields) of a logfmt line: the msg= value, the other pairs."""
    m = _LOGFMT_LEVEL.search(line)
    if m is None:
        return (False, line, None, "", "", "")
    t = _LOGFMT_TIME.search(line)
    g = _LOGFMT_MSG.search(line)
    rest = line
    for mm in sorted((x for x in (m, t, g) if x is not None), key=lambda x: -x.start()):
        rest = rest[:mm.start()] + rest[mm.end():]
    msg = (g.group(2) if g.group(1) else g.group(4)).replace('\\"', '"').strip() if g else ""
    rest = rest.strip()
    return (True, msg or rest or line, level_word(m.group(2)), t.group(2) if t else "", "", rest if msg else "")


def _read_rows(form: str, lines: list[str], rows: list[tuple], cleaned: int) -> Read:
    matched, messages, levels, stamps, hosts, fields = (list(c) for c in zip(*rows)) if rows else ([],) * 6
    bodies = [f"{m} {f}" if f else m for m, f in zip(messages, fields)]
    return Read(form, lines, messages, levels, stamps, hosts if any(hosts) else [], matched, cleaned,
                fields=fields, bodies=bodies)
