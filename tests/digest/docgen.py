"""Seeded documents mixed the way real streams mix them, for the digest's property tests and fuzz runs.

    document(rng, pool) -> str
    check(text, prepared) -> None   (AssertionError naming the broken invariant)

A document interleaves lines of a pool (the caller's: OWN_LINES below in the tests, the shared corpora in
bench/digest_fuzz.py) with made-up lines (timestamps and numbers of every width, JSON and XML fragments,
control bytes, lone surrogates, very long and empty lines), and damages some of them as transports do:
cut short, cut inside a UTF-8 sequence, CRLF, tabs, repeated.
"""

from __future__ import annotations

import json
import random
import re

# Lines written for these tests, one per common shape (none taken from a corpus).
OWN_LINES = [
    "2031-02-03T04:05:06.789Z relay-7 queue[311]: ERROR flush failed after 3 tries (code=17)",
    "2031-02-03 04:05:07,120 WARN  [pool-2-thread-9] c.e.Relay - backlog 1200 above 1000",
    "<13>Feb  3 04:05:08 relay-7 cron[88]: (root) CMD (run-parts /etc/hourly)",
    "<165>1 2031-02-03T04:05:09+02:00 edge-1 portal 4242 ID9 - login ok user=ann",
    "1927463012 2031.02.03 N07-B2 2031-02-03-04.05.10.123456 N07-B2 RAS KERNEL FATAL bus parity error",
    "02/03 04:05:11.500: [amf] INFO: NG setup done (peer 10.1.2.3:38412)",
    "[03/Feb/2031:04:05:12 +0000] \"GET /health HTTP/1.1\" 200 17",
    "Feb 03, 2031 4:05:13 AM org.example.Relay run",
    "I0203 04:05:14.001122   4411 relay.go:88] reconciled 4 objects",
    "time=2031-02-03T04:05:15Z level=warn msg=\"slow disk\" dev=sdb ms=812",
    '{"ts": 1927463016.25, "level": "error", "msg": "dial tcp: i/o timeout", "peer": "10.0.0.9"}',
    '{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": "x"}}]}]}]}',
    "java.lang.IllegalStateException: queue closed",
    "\tat org.example.Relay.flush(Relay.java:212)",
    "Caused by: java.io.IOException: broken pipe",
    "  File \"/srv/app/main.py\", line 40, in handle",
    "Traceback (most recent call last):",
    "2031-02-03 04:05:17.000 UTC [5123] LOG:  checkpoint complete: wrote 12 buffers",
    "Event[3]: Source: Disk Level: Warning Computer: WS-11 Description: retry on sector 0x1f3c",
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/32.435#measCollec">',
    '<measValue measObjLdn="NRCellDU=4"><r p="1">17</r><r p="2">NIL</r></measValue>',
    "iar 00ab12f0 dear 0013c2e8",
    "---- end of dump ----",
    "",
]

_CONTROL = "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x85\u2028\u2029\ufeff"
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
_LEVELS = ["ERROR", "WARN", "INFO", "DEBUG", "FATAL", "E", "W", "<3>", "[error]", "crit", "LOG:", "Note"]


def _number(rng: random.Random) -> str:
    return str(rng.randrange(10 ** rng.randint(0, 22))) if rng.random() < 0.8 else rng.choice(
        ["-1", "0", "1e308", "9" * 40, "0x" + "f" * rng.randint(1, 20), "1.5e-7", "NaN", "inf", "-0"])


def _stamp(rng: random.Random) -> str:
    y, mo, d = rng.randint(0, 9999), rng.randint(0, 13), rng.randint(0, 32)
    h, mi, s = rng.randint(0, 25), rng.randint(0, 61), rng.randint(0, 61)
    frac = "." + str(rng.randrange(10 ** 9)).zfill(rng.randint(1, 9)) if rng.random() < 0.5 else ""
    forms = [
        f"{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{frac}{rng.choice(['Z', '+05:30', '-0800', ''])}",
        f"{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{frac.replace('.', ',')}",
        f"{rng.choice(_MONTHS)} {d:2} {h:02}:{mi:02}:{s:02}",
        f"{y:04}.{mo:02}.{d:02}", f"{y:04}-{mo:02}-{d:02}-{h:02}.{mi:02}.{s:02}{frac}",
        f"{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}{frac}", f"[{d:02}/{rng.choice(_MONTHS)}/{y:04}:{h:02}:{mi:02}:{s:02} +0000]",
        _number(rng), f"{_number(rng)}.{_number(rng)}", f"{h}:{mi}:{s}", f"{y}{mo:02}{d:02}T{h:02}{mi:02}{s:02}",
    ]
    return rng.choice(forms)


def _made_up(rng: random.Random, pool: list[str], most: int) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return f"{_stamp(rng)} {rng.choice(_LEVELS)} {' '.join(_number(rng) for _ in range(rng.randint(0, 4)))}"
    if kind == 1:
        return f"{_stamp(rng)} host-{rng.randint(0, 99)} {rng.choice(_LEVELS)} {rng.choice(pool) if pool else ''}"
    if kind == 2:
        return rng.choice(["{", "}", "[", "]", '{"a":', '{"level":"', '{"resourceLogs":[', '"body":{"stringValue":',
                           "<", "</", "<r p=\"", "<!--", "<?xml", "<measInfo>", "]]>", "<![CDATA[", "&amp;", "&#0;"])
    if kind == 3:
        return "".join(rng.choice(_CONTROL + "ab 1:.=[]") for _ in range(rng.randint(1, 40)))
    if kind == 4:
        return rng.choice([" ", "\t", "   \t ", "\r", "\f", "\v", "\u00a0", "\u3000"]) * rng.randint(1, 5)
    if kind == 5:
        unit = rng.choice(["x", "a1 ", "\u00e9", "\U0001f600", "0", "[", "=", "ERROR ", "%s", "\\", "[x] ", "a:b ",
                           "(", '"', '{"a":', " -", "1.2.3.4 ", "Jan 1 ", ":", "<1>", "0x1f ", "k=v ", "at a.b(C.java:1)"])
        return rng.choice(["", _stamp(rng) + " "]) + unit * rng.randint(min(100, most), min(most, 4000))
    if kind == 6:
        return " ".join(_stamp(rng) for _ in range(rng.randint(1, 4)))
    if kind == 7:
        return f"{_number(rng)} {_number(rng)} {rng.choice(_LEVELS)} node-{_number(rng)} {_number(rng)}"
    return "".join(chr(rng.randint(1, 0x10FFFF)) for _ in range(rng.randint(1, 30))).replace("\n", " ")


def _damage(rng: random.Random, line: str) -> str:
    kind = rng.randrange(8)
    if kind == 0 and line:
        return line[:rng.randrange(len(line))]                                  # cut short
    if kind == 1 and line:
        raw = line.encode("utf-8", "surrogatepass")
        return raw[:rng.randrange(len(raw) + 1)].decode("utf-8", "surrogateescape")  # cut inside a sequence
    if kind == 2:
        return line + "\r"
    if kind == 3:
        return line.replace(" ", "\t")
    if kind == 4:
        at = rng.randint(0, len(line))
        return line[:at] + rng.choice(_CONTROL + "\udcff\ud800\udfff") + line[at:]
    if kind == 5:
        return re.sub(r"\d+", lambda m: _number(rng), line, count=rng.randint(1, 3))
    if kind == 6:
        return _stamp(rng) + " " + line
    return line.upper() if rng.random() < 0.5 else " " * rng.randint(1, 8) + line


def _odd(rng: random.Random):
    """A JSON value of an unexpected type or size."""
    return rng.choice([None, True, -1, 0, 2 ** 70, -(2 ** 63), 1.5, 1e308, "", " ", "x\ny", "\u0000", [], {}, [1, "a"],
                       {"stringValue": "a\nb"}, {"intValue": "12"}, {"arrayValue": {}}, {"kvlistValue": {"values": [{}]}},
                       _number(rng), _stamp(rng), "9" * 25, "ERROR", "\udcff"])


def _otlp(rng: random.Random) -> str:
    def record():
        keys = ["timeUnixNano", "observedTimeUnixNano", "severityNumber", "severityText", "body", "attributes"]
        return {k: _odd(rng) if rng.random() < 0.5 else ok for k, ok in zip(keys, [
            str(rng.randrange(10 ** 19)), "0", rng.randint(0, 24), "WARN", {"stringValue": _stamp(rng) + " ok"},
            [{"key": "k", "value": {"intValue": _number(rng)}}]]) if rng.random() < 0.9}
    res = {"attributes": [{"key": "service.name", "value": {"stringValue": _odd(rng)}}]}
    doc = {"resourceLogs": [{"resource": res if rng.random() < 0.8 else _odd(rng),
                             "scopeLogs": [{"logRecords": [record() for _ in range(rng.randint(0, 20))]}]}]}
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5)


def _pm(rng: random.Random) -> str:
    root = rng.choice(["measCollecFile", "measDataFile"])
    values = "\n".join(
        f'<measValue measObjLdn="{rng.choice(["NRCellDU=", "x=", "", "Cell&amp;"])}{i}">'
        + "".join(f'<r p="{rng.choice([1, 2, 3, 0, -1, "a", ""])}">{rng.choice([_number(rng), "NIL", "", "-", "nan"])}</r>'
                  for _ in range(rng.randint(0, 4)))
        + (f"<measResults>{' '.join(_number(rng) for _ in range(rng.randint(0, 4)))}</measResults>"
           if rng.random() < 0.3 else "") + "</measValue>" for i in range(rng.randint(0, 30)))
    text = (rng.choice(["", '<?xml version="1.0"?>\n', '<?xml-stylesheet href="a"?>\n<?xml version="1.0"?>\n'])
            + f'<{root} xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/32.435#measCollec">\n'
            + f'<fileHeader><measCollec beginTime="{_stamp(rng)}"/></fileHeader><measData>\n'
            + f'<measInfo measInfoId="I"><granPeriod duration="{rng.choice(["PT900S", "PT", "P1D", "PT99999999999H"])}"'
            + f' endTime="{_stamp(rng)}"/><measType p="1">A.Fail</measType><measType p="2">B</measType>'
            + f"<measTypes>{rng.choice(['', 'A B C', 'X'])}</measTypes>\n{values}\n</measInfo>\n"
            + f'</measData><fileFooter><measCollec endTime="{_stamp(rng)}"/></fileFooter></{root}>')
    return text[:rng.randint(len(text) // 2, len(text))] if rng.random() < 0.3 else text


def _events(rng: random.Random) -> str:
    ns = "http://schemas.microsoft.com/win/2004/08/events/event"
    return "\n".join(
        f'<Event xmlns="{ns}">\n<System><Provider Name="{rng.choice(["Disk", "", "a b"])}"/>'
        f"<Level>{rng.choice([_number(rng), '2', ''])}</Level>\n<TimeCreated SystemTime=\"{_stamp(rng)}\"/>"
        f"<Computer>{rng.choice(['WS-1', '', '<'])}</Computer></System>\n</Event>" for _ in range(rng.randint(1, 8)))


def _records(rng: random.Random) -> str:
    """JSON lines or logfmt pairs, values of any type where a time, level, message or host goes."""
    keys = ["ts", "time", "@timestamp", "timeUnixNano", "level", "severity", "severityNumber", "lvl", "msg", "message",
            "body", "host", "logger", "_PID", "x"]
    rows = [{k: _odd(rng) if rng.random() < 0.5 else _stamp(rng) for k in rng.sample(keys, rng.randint(0, 6))}
            for _ in range(rng.randint(1, 40))]
    if rng.random() < 0.5:
        return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
    return "\n".join(" ".join(f"{k}={json.dumps(v) if rng.random() < 0.3 else v}" for k, v in r.items()) for r in rows)


def _structured(rng: random.Random) -> str:
    return rng.choice([_otlp, _pm, _events, _records, _records])(rng)


def document(rng: random.Random, pool: list[str], most: int = 20000) -> str:
    """One document: 0 to a few hundred lines (now and then up to `most`; a long line repeats a unit up to
    min(`most`, 4000) times), pool lines and made-up ones interleaved, some damaged,
    runs of repeated lines, LF or CRLF, with or without a final newline."""
    shape = rng.random()
    if shape < 0.12:
        text = _structured(rng)
        return _damage(rng, text) if rng.random() < 0.3 else text
    if shape < 0.15:
        return rng.choice(["", " ", "\n", "\r\n", "\t\n \n", "\n" * rng.randint(2, 50), "\x00", "\ufeff"])
    n = rng.choice([1, 2, 3, rng.randint(1, 40), rng.randint(1, 300), rng.randint(1, 300),
                    rng.randint(min(1000, most), most) if rng.random() < 0.1 else 5])
    lines: list[str] = []
    while len(lines) < n:
        line = rng.choice(pool) if pool and rng.random() < 0.6 else _made_up(rng, pool, most)
        for piece in line.split("\n"):                                          # multi-line records stay whole
            if rng.random() < 0.3:
                piece = _damage(rng, piece)
            lines += [piece] * (rng.randint(2, 60) if rng.random() < 0.05 else 1)
    sep = "\r\n" if rng.random() < 0.15 else "\n"
    return sep.join(lines) + (sep if rng.random() < 0.5 else "")


def check(text: str, p) -> None:
    """The invariants of prepare()'s result for `text` (a Prepared of PrepareOptions with highlights,
    compaction and render on): the digest is a valid output `digest`, its counts add up, its quotes are
    lines of the redacted, cleaned text."""
    from worker.digest.formats import clean
    from worker.digest.structured import otlp_lines
    from worker.messages.digest import Digest

    assert p.error is None, f"error: {p.error}"
    d = p.digest
    Digest.model_validate(d)
    assert isinstance(p.summary, str) and p.summary, "no summary"
    n = d["lines"]
    assert sum(t["count"] for t in d["templates"]) <= n, "template counts exceed the lines"
    assert d["templates_total"] == len(d["templates"]) + d["omitted"]["templates"], "templates omitted miscounted"
    assert (n == 0) == (d["templates_total"] == 0), "lines without templates or templates without lines"
    assert sum(d["severity"].values()) <= n, "severity counts exceed the lines"
    for t in d["templates"] + d["failures"]:
        assert 1 <= t["first_line"] <= t["last_line"], f"first/last line {t['first_line']}>{t['last_line']}"
        assert t["count"] <= t["last_line"] - t["first_line"] + 1, "a template counts more lines than it spans"
    span = d["span"]
    assert span is None or span["seconds"] >= 0, "negative span"
    redacted = p.text if p.text is not None else text
    if otlp_lines(redacted) is not None:
        return   # an OTLP export's lines are its records, not its text
    cleaned = clean(redacted)[0]
    total = len(redacted.split("\n"))
    for t in d["templates"] + d["failures"]:
        assert t["last_line"] <= total, f"line {t['last_line']} of {total}"
        assert t["example"] in cleaned, f"example not in the text: {t['example'][:60]!r}"
    for h in p.highlights:
        assert h in cleaned, f"highlight not in the text: {h[:60]!r}"
