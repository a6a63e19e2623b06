"""bench/multigpu.py's readings of a supervisor: which partitions each child holds (from the children's
JSON log lines) and which process is which child (from /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import orjson

from bench.multigpu import children_of, partitions_held, survivor_pause


def _line(**rec) -> bytes:
    return orjson.dumps(rec) + b"\n"


def test_partitions_follow_assign_revoke_and_a_restart(tmp_path):
    log = tmp_path / "sup.log"
    log.write_bytes(b"".join([
        b"not json: a child's traceback line\n",
        _line(msg="child gpu0 started pid 10", gpu=0),
        _line(msg="child gpu1 started pid 11", gpu=1),
        _line(msg="assigned [...]", gpu="0", partitions=[["in", 1], ["in", 3]]),
        _line(msg="assigned [...]", gpu="1", partitions=[["in", 0], ["in", 2]]),
        _line(msg="child gpu1 exited with code -9; restarting in 1 s", gpu=1),
        _line(msg="child gpu1 started pid 12", gpu=1),  # the restarted child holds nothing yet
        _line(msg="assigned [...]", gpu="0", partitions=[["in", 0], ["in", 2]]),
        _line(msg="revoked [...]", gpu="0", partitions=[["in", 2]]),
        _line(msg="assigned [...]", gpu="1", partitions=[["in", 2]]),
    ]))
    assert partitions_held(log, 0) == {"gpu0": [0, 1, 3], "gpu1": [2]}
    since = len(log.read_bytes())
    with open(log, "ab") as fh:
        fh.write(_line(msg="lost [...]", gpu="1", partitions=[["in", 2]]))
    assert partitions_held(log, since) == {"gpu1": []}  # only what came after `since`


def test_children_are_found_by_their_gpu_index():
    script = ("import os, subprocess, sys\n"
              "for g in ('0', '3'):\n"
              "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'],\n"
              "                     env={**os.environ, 'RIBBON_GPU_INDEX': g})\n"
              "print('up', flush=True)\n"
              "import time; time.sleep(30)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert parent.stdout.readline().strip() == b"up"
        deadline = time.monotonic() + 10
        while len(found := children_of(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(found) == [0, 3] and len(set(found.values())) == 2
    finally:
        for pid in children_of(parent.pid).values():
            os.kill(pid, 9)
        parent.kill()
        parent.wait()
        parent.stdout.close()


def _every(start: float, stop: float, step: float = 0.2, first: int = 0) -> list[tuple[float, float]]:
    """(time, summaries) samples from `start` to `stop`, one more summary at each."""
    n = round((stop - start) / step)
    return [(start + i * step, first + i) for i in range(n + 1)]


def test_a_survivor_that_publishes_all_it_gets_then_waits_for_the_restart_has_no_pause():
    # the load's last summary read 30 s after the kill; the killed child ready again 52 s after it: the
    # survivor, idle from its last summary on (nothing left to publish), did not pause
    points = _every(-2.0, 30.0) + [(30.0 + 0.2 * i, 160) for i in range(1, 111)]
    assert survivor_pause(points, 0.0, 52.0, 30.0) < 0.5


def test_a_survivor_that_stops_publishing_while_documents_wait_has_that_pause():
    before, after = _every(-2.0, 3.0), _every(10.0, 30.0, first=26)
    assert abs(survivor_pause(before + after, 0.0, 52.0, 30.0) - 7.0) < 0.5
