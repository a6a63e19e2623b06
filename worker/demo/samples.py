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
