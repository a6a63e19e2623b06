"""Synthetic telemetry documents (deterministic): for the demo, the tests and the benchmarks.

Five kinds, as our users send them: OAM call traces, syslog, network-function
logs, crash dumps and PM counter files, each with a fault to find.
"""

from __future__ import annotations

import random

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
