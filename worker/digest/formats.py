"""The format layer: what comes before templating (one regex pass per document).

    read(text) -> Read: the lines cleaned (ANSI/VT escape sequences and other control bytes removed,
                  the text kept), the header format recognised, and per line: its message (the header
                  taken off), level, timestamp text, host.

A document's format is chosen once, from a sample of its lines, among the headers below (the one
that matches most lines, if it matches at least a quarter of them; remembered by the look of the
sample, so documents of one source are not sampled again); then one multi-line regex of
that header runs over the whole text (C speed, no Python per line), giving one row per line.
A line the header does not match (a stack frame, a continuation) keeps its whole text as its
message. Unknown formats fall back to the lines as they are (templated whole, as before).

Headers read (the `form` names):
- `rfc5424`  `<165>1 2026-12-01T10:00:00Z host app 123 ID47 [sd] msg` (PRI -> level)
- `rfc3164`  `<13>Dec  1 10:00:00 host tag[123]: msg` (PRI optional; or an RFC 3339 time, as rsyslog
             and `journalctl -o short-iso` write it)
- `klog`     `E1203 10:00:00.123456   123 file.go:42] msg` (glog/klog: I W E F)
- `logcat`   `03-17 16:13:38.811  1702  2395 D Tag: msg` (Android threadtime)
- `apache`   `[Sun Dec 04 04:47:44 2005] [error] msg` (Apache error log)
- `access`   `10.0.0.1 - - [01/Dec/2026:10:00:01 +0100] "GET / HTTP/1.1" 503 12` (common/combined access
             log: status 5xx -> ERROR, 4xx -> WARN, else INFO)
- `hpc`      `- 1117838570 2005.06.03 node ... RAS KERNEL INFO msg` (loghub BGL/Thunderbird-style lines)
- `timestamped` a timestamp (ISO 8601 with `T`/space and `.`/`,` fractions, `yy/MM/dd`, `MM-dd`,
             `MM/dd`, `MM.dd`, `yyMMdd HHmmss`, `yyyyMMdd-HH:mm:ss:SSS`, epoch s/ms, optionally in
             brackets), then optionally a pid, a host or logger name and a level word (any spelling
             of levels_table: `INFO`, `[ERRO]`, `Warning`, `<warn>`), bracketed threads/components
             (`[main]`, `[INFO][AMF][NGAP]`), a `logger.Name:`, `pkg/file.go:12` or `CBS  ` component:
             log4j, Python logging, Go (zap, free5gc-style), Windows CBS, Hadoop/HDFS/Zookeeper/OpenStack,
             HealthApp-style `ts|comp|pid|` and Proxifier-style `[MM.dd hh:mm:ss] prog - ` headers
- `level_first` `ERROR:root:msg` (Python's default), `ERRO[0012] msg` (logrus), `WARN 2026-... msg`
- `logfmt`   `ts=... level=warn msg="..."` (level=/lvl=/severity= anywhere in the line)
- `json`     JSON lines: `level`/`severity`/`lvl`/`severityText`/`severityNumber` (OTLP), `msg`/`message`/`body`
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from operator import itemgetter

import orjson

from worker.digest.levels_table import SPELLINGS, from_otlp, from_pri, level_word

SAMPLE_LINES = 16        # lines read to choose a document's format
MIN_SHARE = 0.25         # a header must match this share of the sampled lines

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # what stays after the sequences (tab, \r, \n kept)
_CONTROL_BYTES = bytes([*range(0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f])   # the same, as UTF-8 bytes (all ASCII)

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_FRAC = r"(?:[.,:]\d{1,9})?"
_ZONE = r"(?:\s?(?:Z|[+-]\d{2}:?\d{2}|UTC|GMT))?"
_TS_LIST = (
    rf"\d{{4}}[-/.]\d{{2}}[-/.]\d{{2}}[T ]\d{{2}}:\d{{2}}:\d{{2}}{_FRAC}{_ZONE}",   # ISO 8601 and friends
    r"\d{4}-\d{2}-\d{2}-\d{2}\.\d{2}\.\d{2}\.\d{1,6}",                             # 2005-06-03-15.42.50.675872
    rf"\d{{2}}/\d{{2}}/\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}{_FRAC}",                     # yy/MM/dd HH:mm:ss
    rf"\d{{2}}[-/.]\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}{_FRAC}",                         # MM-dd, MM/dd, MM.dd
    r"\d{6} \d{6}",                                                                # yyMMdd HHmmss
    r"\d{8}-\d{1,2}:\d{1,2}:\d{1,2}(?::\d{1,3})?",                                     # yyyyMMdd-HH:mm:ss:SSS
    r"\d{13}(?![\d.])|\d{10}(?:\.\d{1,6})?(?![\d.])",                               # epoch ms / s
)
_TS_ANY = "|".join(_TS_LIST)
_LEVEL_ALT = "|".join(sorted((re.escape(w) for w in SPELLINGS), key=len, reverse=True))
_LEVEL = rf"(?i:{_LEVEL_ALT})(?![\w.])"
_LEVEL_UPPER = "|".join(sorted((re.escape(w.upper()) for w in SPELLINGS), key=len, reverse=True))
_BRACKETS = r"(?:\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]\s*(?:-\s+)?)*"   # [thread] [a[b]] ... (one nesting level)
_HEADERS: dict[str, str] = {
    "rfc5424": r"<(?P<pri>\d{1,3})>\d{1,2} (?P<ts>\S+) (?P<host>\S+) (?P<comp>\S+) \S+ \S+ "
               r"(?:-|(?:\[(?:[^\]\\]|\\.)*\])+) ?",
    "rfc3164": rf"(?:<(?P<pri>\d{{1,3}})>)?(?P<ts>{_MON} {{1,2}}\d{{1,2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,6}})?"
               rf"|\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,9}})?(?:Z|[+-]\d{{2}}:?\d{{2}})) "
               rf"(?!{_LEVEL}\s)(?P<host>[^\s:\[]+) (?P<comp>[^\s:\[]+(?:\[[^\]]*\])?): ?",
    "access": r"(?P<host>\S+) \S+ \S+ \[(?P<ts>\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "
              r'(?=(?:"[^"]*"|\S+) (?P<status>\d{3})\b)',
    "klog": r"(?P<lvl>[IWEF])(?P<ts>\d{4} \d{2}:\d{2}:\d{2}\.\d{1,6})\s+\d+ (?P<comp>[^\s\]]+)\] ",
    "logcat": r"(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3})\s+\d+\s+\d+ (?P<lvl>[VDIWEFA]) (?P<comp>[^:]*): ",
    "apache": rf"\[(?P<ts>{_DAY} {_MON} \d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)? \d{{4}})\] "
              r"\[(?:[\w.]+:)?(?P<lvl>[a-z]+\d?)\] (?:\[pid \d+(?::tid \d+)?\] )?",
    "hpc": rf"(?:-|[A-Z][A-Z_]*) (?P<ts>\d{{10}}) \d{{4}}\.\d{{2}}\.\d{{2}} (?P<host>\S+) "
           rf"(?:\S+ \S+ (?P<comp>\w+ \w+) (?P<lvl>{_LEVEL}) "
           rf"|{_MON} {{1,2}}\d{{1,2}} \d{{2}}:\d{{2}}:\d{{2}} \S+ (?P<comp2>[^\s:\[]+(?:\[[^\]]*\])?): ?)",
    "timestamped": "",  # built by _timestamped()
    "level_first": rf"(?P<lvl>{_LEVEL_UPPER})(?:\[(?P<ts2>[^\]]*)\]|:(?P<comp>[\w.]*):"
                   rf"|\s+\[?(?P<ts>{_TS_ANY})\]?)?[\s:]+",
}
_TS_BRANCHES = [re.compile(rf"(?:{b})") for b in _TS_LIST]
_COMPONENTS = [
    r"(?P<comp>[A-Za-z_$][\w$\-]*(?:[.$@][\w$\-]+)+(?:\[\d+\])?):\s+",    # org.x.Y: / a.b$C@12:
    r"(?P<comp2>[a-z_]\w*(?:\.\w+){2,})\s+(?:\[[^\]]*\]\s*)?",             # nova.compute.manager [req]
    r"(?P<comp3>[\w./-]+\.\w+:\d+)\s+",                                     # pkg/file.go:12
    r"(?P<comp4>[A-Z]\w{1,15})\s{2,}"]                                         # CBS  (Windows)
_ALL_SHAPE = (True, _TS_ANY, True, True, True, True, True, (0, 1, 2, 3), True, True)


def _timestamped(shape: tuple = _ALL_SHAPE, level: str = _LEVEL) -> str:
    """The `timestamped` header with only the parts of `shape` (what a document's sample used)."""
    pre, ts, pid, host, lvl, lvl_br, brackets, comps, pipes, prog = shape
    out = (r"(?P<pre>\S+ )?" if pre else "") + rf"\[?(?P<ts>{ts})\]?(?:[,|]\s*|\s+)(?:-\s+)?"
    out += r"(?P<pid>\d+\s+)?" if pid else ""
    alts = []
    if lvl:
        guard = rf"(?!{_LEVEL}\s)" if level is _LEVEL else ""   # a specialized pass checks this after
        part = rf"(?:{guard}(?P<host>[A-Za-z][\w.:/-]*)\s+(?:-\s+)?)?" if host else ""
        part += (r"(?P<lb>[\[<(])?" if lvl_br else "") + rf"(?P<lvl>{level})" + (r"[\]>)]?" if lvl_br else "")
        part += r":?(?:\s+[-|:]\s+|\s+|(?=\[))"
        part += rf"(?P<brk>{_BRACKETS[:-1]}+)?" if brackets else ""
        if comps:
            part += "(?:" + "|".join(_COMPONENTS[i] for i in comps) + ")?"
        alts.append(part)
    if pipes:
        alts.append(r"(?P<pipes>(?:[^|\s]*\|){1,3})")
    if prog:
        alts.append(r"(?P<prog>[\w.-]+(?: \*\d{1,3})?) - ")
    return out + ("(?:" + "|".join(alts) + ")?" if alts else "")


_HEADERS["timestamped"] = _timestamped()
_HEAD = {name: re.compile(h) for name, h in _HEADERS.items()}
_ROWS = {name: re.compile(rf"^(?:{h})?(.*)$", re.M) for name, h in _HEADERS.items()}
_HOST_GUARD = rf"(?!{_LEVEL}\s)"
_IS_LEVEL = re.compile(_LEVEL)
# rfc3164 without its host guard (a level word where the host goes), the per-line cost of most of the
# regex: the rows whose host is a level word are read again by the guarded regex (_reread_hosts)
_UNGUARDED = {"rfc3164": re.compile(rf"^(?:{_HEADERS['rfc3164'].replace(_HOST_GUARD, '')})?(.*)$", re.M)}
_LEVEL_ANY = r"[A-Za-z]{1,11}(?![\w.])"   # a specialized header takes any word here; non-levels are re-read


def _shape_of(sample: list[str]) -> tuple:
    """The parts of the `timestamped` header the sampled lines use (the rest is left out of the regex)."""
    rx = _HEAD["timestamped"]
    ms = [m for m in map(rx.match, sample) if m is not None]
    used = lambda g: any(m.group(g) for m in ms)  # noqa: E731
    branch = next((b.pattern for b in _TS_BRANCHES if all(b.fullmatch(m.group("ts")) for m in ms)), _TS_ANY)
    comps = tuple(i for i, g in enumerate(("comp", "comp2", "comp3", "comp4")) if used(g))
    return (used("pre"), branch, used("pid"), used("host"), used("lvl"), used("lb"), used("brk"), comps,
            used("pipes"), used("prog"))


_SHAPE_GROUPS = re.compile(r"\(\?P<(?:pre|pid|lb|brk|comp\d?|pipes|prog)>")


@functools.lru_cache(maxsize=64)
def _specialized(shape: tuple) -> re.Pattern:
    """The document's header regex: only its parts, capturing only ts, host, level and the message."""
    return re.compile(_SHAPE_GROUPS.sub("(?:", rf"^(?:{_timestamped(shape, _LEVEL_ANY)})?(.*)$"), re.M)


def _reread_hosts(form: str, lines: list[str], rows: list[tuple]) -> list[tuple]:
    """Rows of an _UNGUARDED pass whose host is a level word, read again by the guarded regex."""
    full = _ROWS[form]
    h = full.groupindex["host"] - 1
    wrong = {x for x in set(map(itemgetter(h), rows)) if x and _IS_LEVEL.fullmatch(x)}
    if not wrong:
        return rows
    return [tuple(g or "" for g in full.match(lines[i]).groups()) if r[h] in wrong else r
            for i, r in enumerate(rows)]


def _reread(rx: re.Pattern, lines: list[str], rows: list[tuple]) -> list[tuple]:
    """Rows of a specialized `timestamped` pass whose level word is no level, read again by the full header."""
    at = rx.groupindex.get("lvl")
    if at is None:
        return rows
    words = {r[at - 1] for r in rows}
    wrong = {w for w in words if w and level_word(w) is None}
    h = rx.groupindex.get("host")
    if h is not None:   # `INFO critical section ...`: the level taken for a host
        hosts = {r[h - 1] for r in rows}
        wrong_host = {x for x in hosts if x and level_word(x) is not None}
    else:
        wrong_host = set()
    if not wrong and not wrong_host:
        return rows
    bad = [i for i, r in enumerate(rows) if r[at - 1] in wrong or (h is not None and r[h - 1] in wrong_host)]
    full = _ROWS["timestamped"]
    names = sorted(rx.groupindex.items(), key=lambda kv: kv[1])
    rows = list(rows)
    for i in bad:
        m = full.match(lines[i])
        rows[i] = tuple((m.group(n) or "") if n in full.groupindex else "" for n, _ in names) + (m.groups()[-1],)
    return rows


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
    matched: list[bool]          # [L] the header matched this line (False: a continuation or other line)
    cleaned: int                 # lines whose control bytes were removed


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
    """The header format most of a document's sampled lines have, or None."""
    sample = _sample(lines)
    if not sample:
        return None
    if sum(ln.lstrip().startswith("{") for ln in sample) >= MIN_SHARE * len(sample):
        if sum(_json_row(ln)[0] for ln in sample) >= MIN_SHARE * len(sample):
            return "json"
    # the headers that read one of the first lines are counted first; the others only if none is enough
    likely = [name for name, rx in _HEAD.items() if any(rx.match(ln) for ln in sample[:2])]
    for names in (likely, [n for n in _HEAD if n not in likely]):
        best, best_n = None, 0
        for name in names:
            n = sum(_HEAD[name].match(ln) is not None for ln in sample)
            if n > best_n:
                best, best_n = name, n
                if n == len(sample):     # every sampled line: no other header can do better
                    break
        if best is not None and best_n >= MIN_SHARE * len(sample):
            return best
    if sum(_LOGFMT_LEVEL.search(ln) is not None for ln in sample) >= MIN_SHARE * len(sample):
        return "logfmt"
    return None


_SIGNATURE = str.maketrans("123456789", "0" * 9)
_CHOSEN: dict[str, tuple[str | None, re.Pattern | None]] = {}   # first line's signature -> format, regex
CHOSEN_MAX = 4096


def _choose(lines: list[str]) -> tuple[str | None, re.Pattern | None]:
    """The format of a document and its rows regex, remembered by the look of its sampled lines (their
    first 160 characters with every digit written 0: no header regex tells digits apart): documents of
    one source look alike, and two documents that look alike get the choice each would get alone (when
    their headers end within those 160 characters)."""
    sig = "\n".join(ln[:160] for ln in _sample(lines)).translate(_SIGNATURE)
    hit = _CHOSEN.get(sig)
    if hit is not None:
        return hit
    form = detect(lines)
    rx = None
    if form is not None and form not in ("json", "logfmt"):
        rx = _specialized(_shape_of(_sample(lines))) if form == "timestamped" else _UNGUARDED.get(form, _ROWS[form])
    if len(_CHOSEN) >= CHOSEN_MAX:
        _CHOSEN.clear()
    _CHOSEN[sig] = (form, rx)
    return form, rx


def read(text: str, lines: list[str] | None = None) -> Read:
    """The format layer over one document (see the module docstring)."""
    text, cleaned = clean(text)
    if cleaned or lines is None:
        lines = text.split("\n")
    form, rx = _choose(lines)
    if form is None:
        n = len(lines)
        return Read(None, lines, lines, [None] * n, [""] * n, [], [False] * n, cleaned)
    if form == "json":
        return _read_rows(form, lines, [_json_row(ln) for ln in lines], cleaned)
    if form == "logfmt":
        return _read_rows(form, lines, [_logfmt_row(ln) for ln in lines], cleaned)
    rows = rx.findall(text)
    if len(rows) != len(lines):   # a line the multi-line pass reads differently: go line by line
        rows = [tuple(g or "" for g in rx.match(ln).groups()) for ln in lines]
    if form == "timestamped":
        rows = _reread(rx, lines, rows)
    elif rx is not _ROWS[form]:
        rows = _reread_hosts(form, lines, rows)
    return _columns(form, rx, lines, rows, cleaned)


def _columns(form: str, rx: re.Pattern, lines: list[str], rows: list[tuple], cleaned: int) -> Read:
    cols = list(zip(*rows)) if rows else [()] * (rx.groups)
    gi = rx.groupindex
    n = len(lines)

    def col(name: str) -> tuple:
        return cols[gi[name] - 1] if name in gi else ("",) * n

    messages = list(cols[-1])
    stamps = list(col("ts"))
    if "ts2" in gi:
        stamps = [a or b for a, b in zip(stamps, col("ts2"))]
    lv_text = col("lvl")
    cache = {w: level_word(w) for w in set(lv_text)}
    levels = list(map(cache.__getitem__, lv_text))
    if "status" in gi:          # access logs: 5xx an ERROR, 4xx a WARN, the rest INFO
        levels = [("ERROR" if c[0] == "5" else "WARN" if c[0] == "4" else "INFO") if c else None
                  for c in col("status")]
    if "pri" in gi:
        pri = col("pri")
        by_pri = {p: from_pri(p) for p in set(pri) if p}
        if by_pri:
            levels = [by_pri[p] if p else lv for p, lv in zip(pri, levels)]
    witness = stamps if form not in ("level_first",) else lv_text
    matched = list(map(bool, witness))
    hosts = list(col("host")) if "host" in gi else []
    return Read(form, lines, messages, levels, stamps, hosts, matched, cleaned)


_JSON_LEVEL = ("level", "severity", "lvl", "loglevel", "log.level", "severityText", "severity_text", "levelname")
_JSON_MSG = ("msg", "message", "body", "Body", "log", "text")
_JSON_TIME = ("time", "timestamp", "ts", "@timestamp", "t", "datetime", "timeUnixNano", "time_unix_nano", "asctime")


def _json_row(line: str) -> tuple:
    """(matched, message, level, stamp, host) of a JSON line."""
    s = line.strip()
    if not s.startswith("{"):
        return (False, line, None, "", "")
    try:
        obj = orjson.loads(s)
    except orjson.JSONDecodeError:
        return (False, line, None, "", "")
    if not isinstance(obj, dict):
        return (False, line, None, "", "")
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
    stamp = str(stamp) if isinstance(stamp, (str, int, float)) else ""
    if len(stamp) == 19 and stamp.isdigit():  # unix nanoseconds
        stamp = stamp[:13]
    host = next((obj[k] for k in ("host", "hostname", "service", "logger", "caller") if isinstance(obj.get(k), str)), "")
    used = set(_JSON_LEVEL) | set(_JSON_MSG) | set(_JSON_TIME) | {"severityNumber", "severity_number"}
    rest = " ".join(f"{k}={_scalar(v)}" for k, v in obj.items() if k not in used)
    text = (str(msg) if msg is not None else "") + (" " + rest if rest else "")
    return (True, text.strip() or s, level, stamp, host)


def _scalar(v) -> str:
    if isinstance(v, str):
        return v if v and " " not in v else orjson.dumps(v).decode()
    return orjson.dumps(v).decode()


def _logfmt_row(line: str) -> tuple:
    """(matched, message, level, stamp, host) of a logfmt line: the msg= value first, then the other pairs."""
    m = _LOGFMT_LEVEL.search(line)
    if m is None:
        return (False, line, None, "", "")
    t = _LOGFMT_TIME.search(line)
    g = _LOGFMT_MSG.search(line)
    rest = line
    for mm in sorted((x for x in (m, t, g) if x is not None), key=lambda x: -x.start()):
        rest = rest[:mm.start()] + rest[mm.end():]
    msg = (g.group(2) if g.group(1) else g.group(4)) if g else ""
    text = (msg.replace('\\"', '"') + " " + rest.strip()).strip()
    return (True, text, level_word(m.group(2)), t.group(2) if t else "", "")


def _read_rows(form: str, lines: list[str], rows: list[tuple], cleaned: int) -> Read:
    matched, messages, levels, stamps, hosts = (list(c) for c in zip(*rows)) if rows else ([], [], [], [], [])
    return Read(form, lines, messages, levels, stamps, hosts if any(hosts) else [], matched, cleaned)
