"""`ribbon run --gpus`: two children on fake CPU "devices", a child killed and restarted, SIGTERM drains all."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import orjson
import pytest
from helpers import ROOT, by_id, mixed_docs, produce, read_until_ids, topics, worker_env

from worker.kafka.broker import free_port
from worker.config.errors import StartupError
from worker.cli.supervisor import child_argv, parse_gpus


def test_gpu_specs_and_child_flags():
    assert parse_gpus("0,2") == [0, 2] and parse_gpus("all", count=3) == [0, 1, 2]
    for bad in ("", "a,b", "1,1", "-1"):
        with pytest.raises(StartupError):
            parse_gpus(bad)
    with pytest.raises(StartupError, match="no CUDA device"):
        parse_gpus("all", count=0)
    argv = ["run", "--gpus", "0,1", "--port=9464", "--device", "cuda:3", "--model", "m"]
    assert child_argv(argv, 9465, "cuda:0") == ["run", "--model", "m", "--port", "9465", "--device", "cuda:0"]


def _pids(log: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for gpu, pid in re.findall(r"child gpu(\d+) started pid (\d+)", log):
        out.setdefault(int(gpu), []).append(int(pid))
    return out


def _wait_for(cond, timeout_s: float, what: str, log_path) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout_s} s; log:\n{log_path.read_text()[-4000:]}")
        time.sleep(0.2)


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status
    except OSError:
        return 0


def test_supervisor_starts_restarts_and_stops_its_children(broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic, partitions=4)
    base = free_port()
    env = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", slot="auto",
                     RIBBON_SERVER__PORT=str(base), RIBBON_LOG_FORMAT="text", **t)
    log = tmp_path / "supervisor.log"
    with open(log, "ab") as fh:
        sup = subprocess.Popen([sys.executable, "-m", "worker", "run", "--gpus", "0,1", "--device", "cpu"],
                               env=env, stdout=fh, stderr=fh, cwd=ROOT)
    try:
        _wait_for(lambda: len(_pids(log.read_text())) == 2, 60, "two children started", log)
        # one metrics/health endpoint per child: base, base + 1
        _wait_for(lambda: _healthz(base) == 200 and _healthz(base + 1) == 200, 120, "both endpoints up", log)
        first = mixed_docs(60, seed=11)
        produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in first])
        got = by_id(read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in first}, 180))
        assert {d["id"] for d in first} <= set(got)

        victim = _pids(log.read_text())[1][0]
        os.kill(victim, signal.SIGKILL)
        _wait_for(lambda: len(_pids(log.read_text()).get(1, [])) == 2, 30, "gpu1 restarted", log)
        assert "child gpu1 exited with code -9" in log.read_text()
        _wait_for(lambda: _healthz(base + 1) == 200, 120, "restarted child serving", log)
        second = mixed_docs(60, seed=12)
        for d in second:
            d["id"] = "second-" + d["id"]
        produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in second])
        got = by_id(read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in second}, 180))
        assert {d["id"] for d in second} <= set(got)
    finally:
        sup.send_signal(signal.SIGTERM)
        rc = sup.wait(120)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    children = [pid for pids in _pids(text).values() for pid in pids]
    for pid in children:  # every child is gone (reaped by the supervisor, not left running)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert text.count("stopped with code 0") == 2
    # each child ran under its own transactional id: <prefix>-<group>-<host>-gpu<N>
    assert "-gpu0" in text and "-gpu1" in text
