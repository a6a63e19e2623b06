"""The whole worker on the defaults of a GPU host, on the CPU: the tiny model in the engine process,
continuous batching, a small pipeline.stall_timeout_s. A worker busy for longer than the stall limit
stays ready; a stopped (SIGSTOP) engine process is killed and the worker exits 1; a restart redoes the
work with nothing lost or repeated (Apache Kafka: read_committed shows no aborted record)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import orjson
from helpers import by_id, produce, read_until_ids, start_worker, topics, wait_for, worker_env, on_apache_kafka

from group_helpers import FAST_GROUP
from worker.demo.samples import document

STALL_S = 10  # pipeline.stall_timeout_s: /readyz not ready at 5 s without progress, exit 1 at 10 s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(cluster, tiny_model: str, t: dict, group: str, port: int = 0) -> dict[str, str]:
    return worker_env(cluster.bootstrap, tiny_model, group=group, **t, **FAST_GROUP,
                      RIBBON_ENGINE__PROCESS="on", RIBBON_BATCHING__MODE="continuous",
                      RIBBON_PIPELINE__STALL_TIMEOUT_S=str(STALL_S), RIBBON_SERVER__PORT=str(port),
                      RIBBON_SERVER__HOST="127.0.0.1")


def readyz(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None  # not listening yet


def engine_pid(worker_pid: int) -> int | None:
    """The worker's engine process: its spawned child (not multiprocessing's resource tracker)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == worker_pid and b"spawn_main" in cmd:
            return int(entry)
    return None


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Feed:
    """Documents produced at a steady rate until stopped; their ids."""

    def __init__(self, bootstrap: str, topic: str, per_s: float) -> None:
        self.bootstrap, self.topic, self.per_s, self.ids = bootstrap, topic, per_s, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(1.0 / self.per_s * 10):
            docs = [document(j, n_lines=2, seed=5) for j in range(i, i + 10)]
            produce(self.bootstrap, self.topic, [orjson.dumps(d) for d in docs])
            self.ids |= {d["id"] for d in docs}
            i += 10

    def __enter__(self) -> Feed:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


@on_apache_kafka
def test_a_worker_busy_past_the_stall_limit_stays_ready(cluster, cluster_topic, tiny_model, tmp_path):
    t, port, log = topics(cluster_topic), free_port(), tmp_path / "worker.log"
    proc = start_worker(env_for(cluster, tiny_model, t, f"g-{uuid.uuid4().hex[:8]}", port), log)
    try:
        wait_for(lambda: readyz(port) == 200 or proc.poll() is not None, 180, "the worker to be ready")
        assert proc.poll() is None, log.read_text()[-3000:]
        samples = []
        with Feed(cluster.bootstrap, t["input_topic"], per_s=40) as feed:
            end = time.monotonic() + 2 * STALL_S  # steady work for twice the stall limit
            while time.monotonic() < end:
                samples.append(readyz(port))
                time.sleep(0.25)
        read = by_id(read_until_ids(cluster.bootstrap, t["output_topic"], feed.ids, 120))
        assert set(read) == feed.ids  # the worker was busy all along: every document summarized
        assert samples and all(s == 200 for s in samples), samples
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)


@on_apache_kafka
def test_a_stopped_engine_process_is_killed_the_worker_exits_1_and_a_restart_redoes_the_work(
        cluster, cluster_topic, tiny_model, tmp_path):
    t, log, group = topics(cluster_topic), tmp_path / "worker.log", f"g-{uuid.uuid4().hex[:8]}"
    docs = [document(i, n_lines=2, seed=6) for i in range(400)]
    ids = {d["id"] for d in docs}
    produce(cluster.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs[:200]])
    proc = start_worker(env_for(cluster, tiny_model, t, group), log)
    try:
        wait_for(lambda: b"assigned [(" in log.read_bytes() or proc.poll() is not None, 180, "an assignment")
        pid = engine_pid(proc.pid)
        assert pid is not None, log.read_text()[-3000:]
        read_until_ids(cluster.bootstrap, t["output_topic"], {docs[0]["id"]}, 120)  # the model at work
        os.kill(pid, signal.SIGSTOP)
        produce(cluster.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs[200:]])  # work in flight
        assert proc.wait(STALL_S + 60) == 1
        text = log.read_text()
        assert "pipeline.stall_timeout_s" in text and "it was killed" in text, text[-3000:]
        wait_for(lambda: gone(pid), 10, "the engine process to be gone")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    again = start_worker(env_for(cluster, tiny_model, t, group), log)
    try:
        read = by_id(read_until_ids(cluster.bootstrap, t["output_topic"], ids, 240))
        assert set(read) == ids
        repeated = {k: len(v) for k, v in read.items() if len(v) > 1}
        assert not repeated, f"{len(repeated)} ids repeated under read_committed"
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(90) == 0
