"""kill -9 during a windowed stream, `--kills` times: every record covered by exactly one committed output.

A producer thread sends one-line syslog records at a steady rate (one host as busy as all the
others together, so commits always meet other keys' open windows) for the whole run. Each cycle
starts a worker (`ribbon run`, digest mode, windowing.enabled), waits for its assignment and for
a commit beyond the last cycle's, waits a random moment, and kills it with SIGKILL. A last worker
then drains (SIGTERM). The committed outputs (read_committed) are matched with the input records:
same partition and key, offset within the window's range. Printed and saved as JSON: records
uncovered, records covered by two different outputs (must be 0), records covered by identical
repeats of one output (the embedded broker shows aborted records to read_committed readers), and
the committed offsets after each cycle (never moving back).

    python -m bench.windows_kill --kills 20     # bench/results/windows_kill_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench.results_io import RESULTS, machine_name, save
from bench.windows import wait_assigned
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import plain_config

ROOT = Path(__file__).resolve().parents[1]


def env_for(bootstrap: str, t: dict, group: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env.update({"RIBBON_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": t["in"],
                "RIBBON_KAFKA__OUTPUT_TOPIC": t["out"], "RIBBON_KAFKA__DLQ_TOPIC": t["dlq"],
                "RIBBON_KAFKA__GROUP_ID": group,
                "RIBBON_KAFKA__CONSUMER_EXTRA": '{"session.timeout.ms": 2000, "heartbeat.interval.ms": 400}',
                "RIBBON_MODEL__MODE": "digest", "RIBBON_WINDOWING__ENABLED": "true",
                "RIBBON_WINDOWING__GAP_S": "1.0", "RIBBON_WINDOWING__MAX_LINES": "20",
                "RIBBON_WINDOWING__MAX_LENGTH_S": "3.0", "RIBBON_PIPELINE__PREPROCESS_PROCESSES": "0",
                "RIBBON_SERVER__PORT": "0", "RIBBON_LOG_FORMAT": "text", "PYTHONUNBUFFERED": "1"})
    return env


class Stream(threading.Thread):
    """Records at `rate`/s: odd ones from 8 hosts in turn, even ones from host-00 (as busy as the rest)."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)

        self.p = clients.producer(plain_config(bootstrap).tool_producer())
        self.topic, self.rate, self.sent, self.halt = topic, rate, 0, threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.halt.is_set():
            i = self.sent
            host = "host-00" if i % 2 == 0 else f"host-{1 + (i // 2) % 8:02d}"
            self.p.produce(self.topic, value=f"<14>Oct 11 22:14:{i % 60:02d} {host} app[{i % 97}]: event {i}".encode(),
                           key=host.encode())
            self.p.poll(0)
            self.sent += 1
            time.sleep(max(0.0, start + self.sent / self.rate - time.monotonic()))
        self.p.flush(30)


def committed(bootstrap: str, group: str, topic: str, parts: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [max(tp.offset, 0) for tp in c.committed([TopicPartition(topic, p) for p in range(parts)], timeout=10)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, parts: int, isolation: str, until=None, timeout_s: float = 120.0) -> list:
    c = clients.consumer(plain_config(bootstrap).tool_consumer(f"wk-{uuid.uuid4().hex[:8]}",
                                                               **{"isolation.level": isolation}))
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(parts)])
    out, idle, deadline = [], 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = [m for m in c.consume(1000, 0.5) if m.error() is None]
        out += got
        idle = 0 if got else idle + 1
        if (until is not None and until(out)) or (until is None and idle >= 4):
            break
    c.close()
    return out


def coverage(inputs: dict[tuple[int, int], str], outs: list[dict]) -> dict:
    by_part: dict[int, list[tuple[int, str]]] = {}
    for (p, off), key in sorted(inputs.items()):
        by_part.setdefault(p, []).append((off, key))
    cov: dict[tuple[int, int], list[dict]] = {k: [] for k in inputs}
    bad_counts = 0
    for o in outs:
        w = o["window"]
        (r,) = w["offsets"]
        mine = [off for off, key in by_part.get(r["partition"], []) if key == w["key"] and r["first"] <= off <= r["last"]]
        bad_counts += len(mine) != w["records"]
        for off in mine:
            cov.setdefault((r["partition"], off), []).append(o)
    differing = identical = 0
    for copies in cov.values():
        if len(copies) > 1:
            first = {**copies[0], "timing_ms": None}
            if all({**c, "timing_ms": None} == first for c in copies[1:]):
                identical += 1
            else:
                differing += 1
    return {"records": len(inputs), "uncovered": sum(1 for c in cov.values() if not c),
            "covered_by_differing_outputs": differing, "covered_by_identical_repeats": identical,
            "outputs": len(outs), "outputs_whose_count_mismatches_their_range": bad_counts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--rate", type=float, default=300.0)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--log", default="/tmp/ribbon-bench-windows-kill.log")
    ap.add_argument("--out", default=str(RESULTS / "windows_kill_cpu.json"))
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    tag = uuid.uuid4().hex[:8]
    t = {"in": f"wk-in-{tag}", "out": f"wk-out-{tag}", "dlq": f"wk-dlq-{tag}"}
    group = f"wk-{tag}"
    Path(args.log).touch()
    with EmbeddedBroker() as broker:
        broker.create_topics({t["in"]: args.partitions, t["out"]: 3, t["dlq"]: 1})
        env = env_for(broker.bootstrap, t, group)
        history = [[0] * args.partitions]
        stream = Stream(broker.bootstrap, t["in"], args.rate)
        stream.start()
        started = time.time()
        with open(args.log, "ab") as log:
            for _ in range(args.kills):
                since = Path(args.log).stat().st_size
                proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], cwd=ROOT, env=env, stdout=log,
                                        stderr=log)
                wait_assigned(args.log, since, proc, 90)
                deadline = time.monotonic() + 60
                while sum(committed(broker.bootstrap, group, t["in"], args.partitions)) <= sum(history[-1]):
                    if time.monotonic() > deadline:
                        raise RuntimeError("no commit within 60 s")
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.2, 1.5))
                proc.kill()
                proc.wait(30)
                history.append(committed(broker.bootstrap, group, t["in"], args.partitions))
            stream.halt.set()
            stream.join(30)
            proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], cwd=ROOT, env=env, stdout=log, stderr=log)
            inputs = {(m.partition(), m.offset()): m.key().decode()
                      for m in read_all(broker.bootstrap, t["in"], args.partitions, "read_uncommitted")}

            def complete(msgs: list) -> bool:
                return sum(orjson.loads(m.value())["window"]["records"] for m in msgs) >= len(inputs)

            outs = [orjson.loads(m.value()) for m in read_all(broker.bootstrap, t["out"], 3, "read_committed",
                                                              until=complete, timeout_s=180)]
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(120)
            final = committed(broker.bootstrap, group, t["in"], args.partitions)
    ends = [1 + max((o for p, o in inputs if p == part), default=-1) for part in range(args.partitions)]
    result = {"benchmark": "windows_kill", "machine": machine_name(), "settings": vars(args).copy(),
              "seconds": round(time.time() - started, 1), "kills": args.kills, "records_sent": stream.sent,
              **coverage(inputs, outs), "last_worker_exit_code": rc,
              "committed_after_each_kill": history[1:], "committed_final": final, "input_end_offsets": ends,
              "offsets_never_moved_back": all(all(a <= b for a, b in zip(x, y)) for x, y in zip(history, history[1:]))}
    print(json.dumps(result, indent=2))
    save(args.out, result)
    ok = result["uncovered"] == 0 and result["covered_by_differing_outputs"] == 0 and final == ends
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
