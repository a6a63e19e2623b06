"""Synthetic telemetry documents (deterministic): for the demo, the tests and the benchmarks.

Five kinds, as our users send them: OAM call traces, syslog, network-function
logs, crash dumps and PM counter files, each with a fault to find.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ELEMENTS = ("gnb-017", "gnb-003", "amf-2", "smf-1", "upf-1", "nrf-1", "ausf-1", "cu-up-4")
FAULTS = (
    ("S1 link down: SCTP association lost to {peer}", "transport"),
    ("registration reject cause=congestion ue=imsi-00101{n:010d}", "overload"),
    ("RRC setup failure: timer T300 expired after {n} ms", "radio"),
    ("PFCP session modify timeout towards {peer}", "signalling"),
    ("certificate for {peer} expired; TLS handshake failed", "security"),
    ("disk /var/log 98% full; log rotation failed", "platform"),
)


def _ts(rng: random.Random, i: int) -> str:
    return f"2026-12-01T{10 + i // 3600 % 12:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randrange(1000):03d}Z"


def _noise(rng: random.Random, el: str, i: int) -> str:
    return rng.choice((
        f"{_ts(rng, i)} {el} INFO heartbeat ok seq={i}",
        f"{_ts(rng, i)} {el} INFO cell {rng.randrange(1, 64)} prb_util={rng.randrange(5, 70)}%",
        f"{_ts(rng, i)} {el} DEBUG ngap ue-context-release ue={rng.randrange(10**6)}",
        f"{_ts(rng, i)} {el} INFO handover success src={rng.randrange(100)} dst={rng.randrange(100)}",
    ))


def document(i: int, n_lines: int | None = None, seed: int = 0) -> dict:
    """One telemetry document as an input message (JSON object)."""
    rng = random.Random(seed * 1_000_003 + i)
    kind = ("trace", "syslog", "log", "crash", "pm")[i % 5]
    el = ELEMENTS[rng.randrange(len(ELEMENTS))]
    peer = ELEMENTS[rng.randrange(len(ELEMENTS))]
    fault, _ = FAULTS[rng.randrange(len(FAULTS))]
    n = n_lines if n_lines is not None else rng.choice((3, 5, 8, 12, 20, 40, 80))
    lines = [_noise(rng, el, rng.randrange(86_400)) for _ in range(n)]
    if kind == "pm":
        lines = [f"{el};cell={c};rrc_conn_estab_succ={rng.randrange(900, 1000)};rrc_conn_estab_att=1000;"
                 f"dl_thp_mbps={rng.uniform(50, 900):.1f}" for c in range(n)]
        lines[rng.randrange(n)] = f"{el};cell=7;rrc_conn_estab_succ=412;rrc_conn_estab_att=1000;dl_thp_mbps=3.1"
    elif kind == "crash":
        lines = [f"{el} crash: segfault in pfcp_session_modify at 0x7f3a{rng.randrange(16**4):04x}"] + \
                [f"  #{k} 0x{rng.randrange(16**12):012x} in frame_{k} ()" for k in range(n)]
    else:
        lines.insert(rng.randrange(len(lines) + 1),
                     f"{_ts(rng, 40_000)} {el} ERROR " + fault.format(peer=peer, n=rng.randrange(10**6)))
    return {"id": f"demo-{seed}-{i}", "source": f"{el}/{kind}", "kind": kind, "lines": lines,
            "attributes": {"site": f"site-{rng.randrange(20)}"}}


def corpus(n: int, seed: int = 0) -> list[dict]:
    return [document(i, seed=seed) for i in range(n)]


# ---- the quality corpus (issue 8): long repetitive logs with known faults and template counts --------------
# Each generator below makes the lines of one template; a document records, outside its message, the
# fault lines it injected and how many templates it holds (the generators it used).

QUALITY_KINDS = ("syslog", "nf", "stack", "pm_xml", "pm_csv", "procedure")
LONG_LENGTHS = (200, 1_000, 5_000, 20_000)


@dataclass(frozen=True)
class Sample:
    message: dict              # the input message (what goes to Kafka)
    faults: tuple[str, ...]    # injected fault lines, verbatim
    templates: int             # true number of line templates


def _syslog_ts(i: int) -> str:
    return f"Dec {1 + i // 86_400 % 28:2d} {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"


def _iso(i: int, rng: random.Random) -> str:
    return f"2026-12-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randrange(1000):03d}Z"


def _ip(rng: random.Random) -> str:
    return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def _syslog(rng, i, el):
    t, pid = _syslog_ts(i), rng.randrange(100, 60_000)
    gens = (
        lambda: f"{t} {el} sshd[{pid}]: Accepted publickey for oam from {_ip(rng)} port {rng.randrange(1024, 65535)} ssh2",
        lambda: f"{t} {el} systemd[1]: Started Session {rng.randrange(10**5)} of user oam.",
        lambda: f"{t} {el} CRON[{pid}]: (root) CMD (run-parts /etc/cron.hourly)",
        lambda: f"{t} {el} ntpd[{pid}]: adjusting local clock by {rng.uniform(-0.5, 0.5):.6f}s",
        lambda: f"{t} {el} kernel: [{i * 1.000123:.6f}] eth0: rx_packets={rng.randrange(10**9)} tx_packets={rng.randrange(10**9)}",
    )
    faults = (
        lambda: f"{t} {el} kernel: [{i * 1.000123:.6f}] bond0: link status definitely down for interface eth1",
        lambda: f"{t} {el} sshd[{pid}]: error: maximum authentication attempts exceeded for root from {_ip(rng)}",
    )
    return gens, faults, (0.55, 0.15, 0.1, 0.1, 0.1)


def _nf(rng, i, el):
    t = _iso(i, rng)
    gens = (
        lambda: f"{t} {el} INFO [pfcp] heartbeat ok seq={i} latency_ms={rng.randrange(1, 30)}",
        lambda: f"{t} {el} DEBUG [ngap] ue-context-release ue={rng.randrange(10**6)} cause=normal-release",
        lambda: f"{t} {el} INFO [sbi] POST /nsmf-pdusession/v1/sm-contexts status=201 duration_ms={rng.randrange(2, 90)}",
        lambda: f"{t} {el} INFO [gtpu] tunnel created teid=0x{rng.randrange(16**8):08x} peer={_ip(rng)}",
        lambda: f"{t} {el} WARN [sbi] retrying request to {rng.choice(ELEMENTS)} attempt={rng.randrange(1, 4)}",
    )
    faults = (
        lambda: f"{t} {el} ERROR [sctp] S1 link down: SCTP association lost to {rng.choice(ELEMENTS)}",
        lambda: f"{t} {el} ERROR [pfcp] session modify timeout towards {_ip(rng)} after 3 retransmissions",
    )
    return gens, faults, (0.5, 0.2, 0.15, 0.1, 0.05)

# (a PM fault is a row of the row template with outlying counters: it adds no template)


_FRAMES = ("com.ribbon.nf.Session.lookup", "com.ribbon.nf.SessionStore.get", "com.ribbon.sbi.Handler.handle",
           "io.netty.channel.AbstractChannelHandlerContext.invokeChannelRead", "java.lang.Thread.run")


def _stack(rng, i, el):
    t = _iso(i, rng)
    gens = (
        lambda: f"{t} {el} INFO [http-nio-8080-exec-{rng.randrange(1, 9)}] request served path=/v1/sessions "
                f"status=200 ms={rng.randrange(1, 40)}",
        lambda: f"{t} {el} ERROR [main] unhandled exception in request {rng.randrange(16**8):08x}",
        lambda: f"java.lang.IllegalStateException: session {rng.randrange(10**6)} not found in store",
        lambda: "\tat " + (f := rng.choice(_FRAMES)) + f"({f.split('.')[-2]}.java:{rng.randrange(20, 900)})",
    )
    faults = (
        lambda: f"{t} {el} FATAL [main] java.lang.OutOfMemoryError: Java heap space; worker restarting",
    )
    return gens, faults, (0.7, 0.05, 0.05, 0.2)


def _pm_xml(rng, i, el):
    def row(succ=None, thp=None):
        return (f'<measValue measObjLdn="ManagedElement={el},NRCellDU={i % 512}"><r p="1">'
                f'{succ if succ is not None else rng.randrange(940, 1000)}</r><r p="2">1000</r><r p="3">'
                f'{thp if thp is not None else round(rng.uniform(400, 900), 1)}</r></measValue>')
    gens = (lambda: row(),)
    faults = (lambda: row(succ=rng.randrange(300, 420), thp=round(rng.uniform(1, 5), 1)),)
    return gens, faults, (1.0,)


def _pm_csv(rng, i, el):
    gens = (lambda: f"{_iso(i, rng)},{el},{i % 512},{rng.randrange(940, 1000)},1000,{rng.uniform(400, 900):.1f},"
                    f"{rng.randrange(0, 3)}",)
    faults = (lambda: f"{_iso(i, rng)},{el},{i % 512},{rng.randrange(300, 420)},1000,{rng.uniform(1, 5):.1f},"
                      f"{rng.randrange(900, 2000)}",)
    return gens, faults, (1.0,)


def _procedure(rng, i, el):
    t, ue = _iso(i, rng), f"imsi-00101{rng.randrange(10**10):010d}"
    gens = (
        lambda: f"{t} {el} INFO ue={ue} RegistrationRequest received type=initial",
        lambda: f"{t} {el} INFO ue={ue} AUSF authentication started method=5G-AKA",
        lambda: f"{t} {el} INFO ue={ue} security mode complete ciphering=NEA2 integrity=NIA2 in {rng.randrange(2, 30)} ms",
        lambda: f"{t} {el} INFO ue={ue} registration accepted area=ta-{rng.randrange(100)} duration_ms={rng.randrange(20, 300)}",
        lambda: f"{t} {el} INFO ue={ue} PDU session established dnn=internet",
    )
    faults = (
        lambda: f"{t} {el} ERROR ue={ue} registration reject cause=congestion after {rng.randrange(900, 3000)} ms",
        lambda: f"{t} {el} ERROR ue={ue} authentication failure: MAC mismatch reported by ausf-1",
    )
    return gens, faults, (0.2, 0.2, 0.2, 0.2, 0.2)


_HEADERS = {
    "pm_xml": ('<?xml version="1.0" encoding="UTF-8"?>',
               '<measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/32.435#measCollec">',
               '<measInfo measInfoId="RRC">'),
    "pm_csv": ("timestamp,ne,cell,rrc_conn_estab_succ,rrc_conn_estab_att,dl_thp_mbps,drops",),
}
_FOOTERS = {"pm_xml": ("</measInfo>", "</measCollecFile>")}
_ROW_FAULTS = frozenset({"pm_xml", "pm_csv"})
_KIND_GEN = {"syslog": _syslog, "nf": _nf, "stack": _stack, "pm_xml": _pm_xml, "pm_csv": _pm_csv,
             "procedure": _procedure}


def labelled(kind: str, i: int, n_lines: int, seed: int = 0, n_faults: int = 2) -> Sample:
    """A long document of one quality kind with n_faults injected fault lines."""
    if kind not in _KIND_GEN:
        raise ValueError(f"kind must be one of {QUALITY_KINDS}, got {kind!r}")
    rng = random.Random(f"{seed}:{kind}:{i}:{n_lines}")
    el = ELEMENTS[rng.randrange(len(ELEMENTS))]
    lines: list[str] = []
    used: set[tuple[str, int]] = set()
    at = sorted(rng.sample(range(1, max(2, n_lines)), min(n_faults, max(1, n_lines - 1))))
    faults: list[str] = []
    start = rng.randrange(3_600, 40_000)
    for j in range(n_lines):
        gens, fgens, weights = _KIND_GEN[kind](rng, start + j, el)
        if at and j == at[0]:
            at.pop(0)
            k = len(faults) % len(fgens)
            faults.append(fgens[k]())
            lines.append(faults[-1])
            used.add(("g", 0) if kind in _ROW_FAULTS else ("f", k))
            continue
        k = rng.choices(range(len(gens)), weights)[0]
        lines.append(gens[k]())
        used.add(("g", k))
    lines = list(_HEADERS.get(kind, ())) + lines + list(_FOOTERS.get(kind, ()))
    message = {"id": f"q-{seed}-{kind}-{i}", "source": f"{el}/{kind}", "kind": kind, "lines": lines}
    return Sample(message, tuple(faults), len(used) + len(_HEADERS.get(kind, ())) + len(_FOOTERS.get(kind, ())))


def quality_corpus(per_kind: int = 4, seed: int = 0, lengths: tuple[int, ...] = LONG_LENGTHS) -> list[Sample]:
    """per_kind documents of each quality kind, their lengths cycling through `lengths`."""
    return [labelled(kind, i, lengths[i % len(lengths)], seed) for kind in QUALITY_KINDS for i in range(per_kind)]


def mixed_corpus(n: int, seed: int = 0, every: int = 10, lengths: tuple[int, ...] = (200, 500, 1_000)) -> list[dict]:
    """corpus(n), with every `every`-th document a long one of the quality corpus (the kinds in turn)."""
    docs = corpus(n, seed)
    for j, i in enumerate(range(every - 1, n, every)):
        s = labelled(QUALITY_KINDS[j % len(QUALITY_KINDS)], i, lengths[j % len(lengths)], seed)
        docs[i] = {**s.message, "id": f"demo-{seed}-{i}", "attributes": {"site": f"site-{i % 20}"}}
    return docs


# ---- the format corpus: one document per log format, every line labelled ------------------------
# Each line is a header in the format's own spelling around one of MESSAGES; the truth kept outside the
# message: each line's level (normalized), its message template, its time, and the document's span.

from datetime import datetime, timedelta, timezone  # noqa: E402 - this section's own imports

MESSAGES = (   # (level, message template); traps: INFO lines that name failure words as parameters
    ("INFO", "session {sid} established for ue imsi-00101{imsi:010d} in {ms} ms"),
    ("INFO", "heartbeat ok seq={seq} timeout={to}ms fail_on_disconnect=true"),
    ("DEBUG", "cache lookup key=k{key} hit={hit}"),
    ("INFO", "critical section entered by worker {w}"),
    ("WARN", "retrying request to {peer} attempt={n}"),
    ("ERROR", "diameter request failed result_code={code} peer={peer}"),
    ("ERROR", "attach reject cause={cause} for imsi-00101{imsi:010d}"),
    ("FATAL", "database connection lost: {peer} unreachable"),
)
_WEIGHTS = (30, 25, 15, 8, 8, 6, 6, 2)
_LETTER = {"FATAL": "F", "CRITICAL": "F", "ERROR": "E", "WARN": "W", "NOTICE": "I", "INFO": "I", "DEBUG": "D",
           "TRACE": "V"}
_SEV = {"FATAL": 0, "CRITICAL": 2, "ERROR": 3, "WARN": 4, "NOTICE": 5, "INFO": 6, "DEBUG": 7}
_ESC = {"FATAL": "\x1b[35m", "ERROR": "\x1b[31m", "WARN": "\x1b[33m", "INFO": "\x1b[36m", "DEBUG": "\x1b[37m"}


def _iso_z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _ms(t: datetime) -> str:
    return f"{t.microsecond // 1000:03d}"


# format -> (header(t, level, host, msg) -> line, level spellings the format has, span form)
FORMAT_HEADERS = {
    "rfc5424": (lambda t, lv, h, m: f"<{8 * 16 + _SEV[lv]}>1 {_iso_z(t)} {h} amfd 4242 NGAP - {m}", "iso"),
    "rfc3164": (lambda t, lv, h, m: f"<{8 * 4 + _SEV[lv]}>{t:%b} {t.day:2d} {t:%H:%M:%S} {h} smfd[311]: {m}",
                "yearless"),
    "klog": (lambda t, lv, h, m: f"{_LETTER[lv] if lv != 'DEBUG' else 'I'}{t:%m%d %H:%M:%S}.{t.microsecond:06d}"
                                 f"    7 controller.go:{len(m)}] {m}", "yearless"),
    "logcat": (lambda t, lv, h, m: f"{t:%m-%d %H:%M:%S}.{_ms(t)}  1702  2395 {_LETTER[lv]} NgapService: {m}",
               "yearless"),
    "apache": (lambda t, lv, h, m: f"[{t:%a %b %d %H:%M:%S %Y}] [{ {'FATAL': 'emerg', 'WARN': 'warn'}.get(lv, lv.lower())}] {m}",
               "local"),
    "log4j": (lambda t, lv, h, m: f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} {lv:5} [main-{len(m) % 3}] com.ribbon.nf.Amf: {m}",
              "local"),
    "python": (lambda t, lv, h, m: f"{t:%Y-%m-%d %H:%M:%S},{_ms(t)} - ribbon.amf - "
                                   f"{ {'FATAL': 'CRITICAL', 'WARN': 'WARNING'}.get(lv, lv)} - {m}", "local"),
    "python_default": (lambda t, lv, h, m: f"{ {'FATAL': 'CRITICAL', 'WARN': 'WARNING'}.get(lv, lv)}:ribbon.amf:{m}",
                       None),
    "free5gc": (lambda t, lv, h, m: f"{_iso_z(t)} {_ESC[lv]}[{ {'FATAL': 'FATA', 'ERROR': 'ERRO', 'DEBUG': 'DEBU'}.get(lv, lv)}]"
                                    f"\x1b[0m[AMF][NGAP] {m}", "iso"),
    "logrus": (lambda t, lv, h, m: f"{_ESC[lv]}{ {'FATAL': 'FATA', 'ERROR': 'ERRO', 'DEBUG': 'DEBU'}.get(lv, lv)}\x1b[0m"
                                   f"[{int(t.timestamp()) % 10000:04d}] {m}", None),
    "zap": (lambda t, lv, h, m: f"{_iso_z(t)}\t{lv.lower() if lv != 'FATAL' else 'fatal'}\tamf/ngap.go:{len(m)}\t{m}", "iso"),
    "logfmt": (lambda t, lv, h, m: f'ts={_iso_z(t)} level={lv.lower()} caller=ngap.go:{len(m)} msg="{m}"', "iso"),
    "json": (lambda t, lv, h, m: '{"time":"' + _iso_z(t) + '","level":"' + lv.lower() + '","host":"' + h
                                 + '","msg":"' + m + '"}', "iso"),
    "windows": (lambda t, lv, h, m: f"{t:%Y-%m-%d %H:%M:%S}, "
                                    f"{ {'FATAL': 'Error', 'ERROR': 'Error', 'WARN': 'Warning', 'DEBUG': 'Info'}.get(lv, 'Info'):<22}"
                                    f"CBS    {m}", "local"),
    "hdfs": (lambda t, lv, h, m: f"{t:%y%m%d %H%M%S} 148 {lv} dfs.DataNode$PacketResponder: {m}", "local"),
    "spark": (lambda t, lv, h, m: f"{t:%y/%m/%d %H:%M:%S} {lv} storage.BlockManager: {m}", "local"),
    "epoch": (lambda t, lv, h, m: f"{int(t.timestamp())} {h} {lv} {m}", "iso"),
    "epoch_ms": (lambda t, lv, h, m: f"{int(t.timestamp() * 1000)} {h} {lv} {m}", "iso"),
    "month_slash": (lambda t, lv, h, m: f"{t:%m/%d %H:%M:%S} {lv} {m}", "yearless"),
}
# the levels each format can write (others are written as the nearest it has, and labelled so)
_FORMAT_LEVELS = {"klog": {"DEBUG": "INFO"}, "windows": {"FATAL": "ERROR", "DEBUG": "INFO"},
                  "python": {"FATAL": "CRITICAL"}, "python_default": {"FATAL": "CRITICAL"}}


@dataclass(frozen=True)
class FormatSample:
    message: dict                        # the input message
    levels: tuple[str | None, ...]       # per line, the true level
    templates: tuple[int, ...]           # per line, the index of its MESSAGES template
    span: tuple[str, str] | None         # the true earliest and latest time, as the digest writes them
    out_of_order: int                    # lines earlier than the line before them
    values: dict                         # variable -> {value: count} of the failure templates


def _fill(rng: random.Random, k: int, i: int) -> tuple[str, dict]:
    v = {"sid": rng.randrange(16**6), "imsi": rng.randrange(10**10), "ms": rng.randrange(5, 80), "seq": i,
         "to": 30, "key": rng.randrange(500), "hit": rng.choice(("true", "false")), "w": rng.randrange(8),
         "peer": rng.choice(("hss-1", "pcrf-2", "amf-3")), "n": rng.randrange(1, 4),
         "code": rng.choice((5001, 5001, 5001, 3002)), "cause": rng.choice((11, 11, 11, 15))}
    return MESSAGES[k][1].format(**v), v


def _stamp_text(t: datetime, form: str | None) -> str | None:
    """A time as the digest writes it: ISO 8601, milliseconds when whole, `Z` when the log gives a zone."""
    if form is None:
        return None
    frac = "" if not t.microsecond else (f".{t.microsecond // 1000:03d}" if t.microsecond % 1000 == 0
                                         else f".{t.microsecond:06d}")
    if form == "yearless":
        return t.strftime("--%m-%dT%H:%M:%S") + frac
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + ("Z" if form == "iso" else "")


def format_sample(fmt: str, n_lines: int = 300, seed: int = 0, cross_day: bool = True,
                  swaps: int = 2) -> FormatSample:
    """One document of `fmt` (FORMAT_HEADERS) with every line labelled."""
    if fmt not in FORMAT_HEADERS:
        raise ValueError(f"format must be one of {sorted(FORMAT_HEADERS)}, got {fmt!r}")
    header, form = FORMAT_HEADERS[fmt]
    rng = random.Random(f"{seed}:{fmt}:{n_lines}")
    start = datetime(2026, 12, 1, 22 if cross_day else 8, 30, 0, tzinfo=timezone.utc)
    step = (4 * 3600 if cross_day else 1800) / n_lines
    times = [start + timedelta(seconds=i * step + rng.random() * step * 0.5) for i in range(n_lines)]
    times = [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in times]    # logs write milliseconds
    if fmt in ("rfc3164", "klog", "month_slash", "spark", "hdfs", "windows", "epoch", "python", "apache"):
        times = [t.replace(microsecond=0) for t in times]
    for _ in range(swaps):           # a line written late: out of order
        j = rng.randrange(1, n_lines - 1)
        times[j], times[j + 1] = times[j + 1], times[j]
    out_of_order = sum(b < a for a, b in zip(times, times[1:]))
    remap = _FORMAT_LEVELS.get(fmt, {})
    lines, levels, templates = [], [], []
    values: dict[str, dict] = {"result_code": {}, "cause": {}}
    for i, t in enumerate(times):
        k = rng.choices(range(len(MESSAGES)), _WEIGHTS)[0]
        msg, v = _fill(rng, k, i)
        level = remap.get(MESSAGES[k][0], MESSAGES[k][0])
        lines.append(header(t, MESSAGES[k][0], "amf-3", msg))
        levels.append(level)
        templates.append(k)
        if k == 5:
            values["result_code"][str(v["code"])] = values["result_code"].get(str(v["code"]), 0) + 1
        if k == 6:
            values["cause"][str(v["cause"])] = values["cause"].get(str(v["cause"]), 0) + 1
    span = None
    if form is not None:
        span = (_stamp_text(min(times), form), _stamp_text(max(times), form))
    message = {"id": f"fmt-{seed}-{fmt}", "source": f"amf-3/{fmt}", "kind": "log", "lines": lines}
    return FormatSample(message, tuple(levels), tuple(templates), span, out_of_order, values)


FORMATS = tuple(FORMAT_HEADERS)


def format_corpus(n_lines: int = 300, seed: int = 0) -> list[FormatSample]:
    """format_sample() of every format."""
    return [format_sample(f, n_lines, seed) for f in FORMATS]
