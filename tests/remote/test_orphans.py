"""kill -9 of a worker takes its children along: the engine process, the preprocessing pool's
forkserver and processes, and multiprocessing's resource tracker (worker/remote/lifeline.py)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import orjson
import pytest
from helpers import mixed_docs, produce, read_until_ids, start_worker, topics, worker_env


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[0], int(fields[1])


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            parents[int(entry)] = st[1]
    out, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - out
        out |= frontier
    return out


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if (st := _stat(p)) is not None and st[0] != "Z"}  # a zombie has ended


@pytest.mark.slow
def test_kill_9_of_the_worker_ends_its_engine_process_and_preprocessing_pool(broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic, partitions=1)
    docs = mixed_docs(3, seed=2)
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    env = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}", **t,
                     RIBBON_ENGINE__PROCESS="on", RIBBON_PIPELINE__PREPROCESS_PROCESSES="2")
    log = tmp_path / "worker.log"
    proc = start_worker(env, log)
    try:
        read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in docs}, timeout_s=120)
        children = descendants(proc.pid)
        # the engine process, the forkserver, its 2 pool processes, the resource tracker
        assert len(children) >= 5, (children, log.read_text()[-3000:])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    deadline = time.monotonic() + 30
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive(children)
    for pid in left:  # not to leave them behind for the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left if _stat(p)]
