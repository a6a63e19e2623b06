"""The supervisor of `ribbon run --gpus` with fake children: back-off, SIGTERM forwarding, identities.

The children here are small Python scripts, not workers: each test runs in about a second. The
real children (workers on fake CPU devices, a broker, a kill -9) are in tests/cli/test_supervisor.py.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from worker.cli.supervisor import (BACKOFF_MAX_S, BACKOFF_START_S, HEALTHY_AFTER_S, Child, Supervisor,
                                   make_children)
from worker.config.errors import EXIT_FAILED, EXIT_USAGE
from worker.kafka.identity import resolve_identity

EXIT_3 = [sys.executable, "-c", "import sys; sys.exit(3)"]
# Writes "<gpu> <identity> <argv>" to its file, then waits; SIGTERM -> "term" line, exit 0.
OBEDIENT = '''
import os, signal, sys, time
from worker.kafka.identity import resolve_identity
out = open(os.environ["FAKE_OUT"] + "-" + os.environ["RIBBON_GPU_INDEX"], "a", buffering=1)
def term(*_):
    out.write("term\\n"); sys.exit(0)
signal.signal(signal.SIGTERM, term)
out.write("%s %s %s\\n" % (os.environ["RIBBON_GPU_INDEX"], resolve_identity("auto"), " ".join(sys.argv[1:])))
while True:
    time.sleep(0.05)
'''
STUBBORN = '''
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.environ["FAKE_OUT"] + "-" + os.environ["RIBBON_GPU_INDEX"], "w").write("up\\n")
while True:
    time.sleep(0.05)
'''


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _wait_for(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _exit_and_tend(sup: Supervisor, c: Child, now: float) -> None:
    c.proc.wait(10)
    sup._tend(c, now)


def test_backoff_doubles_to_its_cap_and_resets_after_a_healthy_run():
    c = Child(0, [], {}, command=EXIT_3)
    clock = FakeClock()
    sup = Supervisor([c], stop_timeout_s=5, clock=clock)
    c.start(clock())
    waits = []
    for _ in range(7):  # each exit schedules the next start one back-off later
        _exit_and_tend(sup, c, clock.now)
        assert c.proc is None
        waits.append(c.due - clock.now)
        sup._tend(c, c.due - 0.01)  # not yet due: nothing starts
        assert c.proc is None
        clock.now = c.due
        sup._tend(c, clock.now)
        assert c.proc is not None
    assert waits == [1, 2, 4, 8, 16, 30, 30] and BACKOFF_START_S == 1 and BACKOFF_MAX_S == 30
    assert c.restarts == 7 and c.codes == [3] * 7
    # A child that stays up past HEALTHY_AFTER_S earns the short back-off again.
    c.command = [sys.executable, "-c", "import time; time.sleep(30)"]
    c.proc.wait(10)
    c.start(clock.now)
    sup._tend(c, clock.now + HEALTHY_AFTER_S + 1)
    assert c.backoff_s == BACKOFF_START_S
    c.proc.kill()
    _exit_and_tend(sup, c, clock.now + HEALTHY_AFTER_S + 2)
    assert c.due == clock.now + HEALTHY_AFTER_S + 2 + BACKOFF_START_S and c.codes[-1] == -signal.SIGKILL


def test_each_child_gets_its_gpu_identity_and_port(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "FAKE_OUT": str(tmp_path / "out")}
    children = make_children([0, 3], ["run", "--gpus", "0,3", "--port", "9464", "--model", "m"], 9464, "cuda:0", env)
    assert [c.env["CUDA_VISIBLE_DEVICES"] for c in children] == ["0", "3"]
    assert [c.argv[-4:] for c in children] == [["--port", "9464", "--device", "cuda:0"],
                                               ["--port", "9465", "--device", "cuda:0"]]
    cpu = make_children([0, 1], ["run"], 0, "cpu", env)
    assert all("CUDA_VISIBLE_DEVICES" not in c.env for c in cpu) and cpu[1].argv[-4:-2] == ["--port", "0"]
    for c in children:
        c.command = [sys.executable, "-c", OBEDIENT]
    sup = Supervisor(children, stop_timeout_s=10)
    rc: list[int] = []
    t = threading.Thread(target=lambda: rc.append(sup.run()))
    t.start()
    files = [tmp_path / "out-0", tmp_path / "out-3"]
    try:
        _wait_for(lambda: all(f.exists() and f.read_text() for f in files), 30, "both children up")
    finally:
        sup.on_signal(signal.SIGTERM, None)
        t.join(30)
    first = [f.read_text().splitlines() for f in files]
    ids = [lines[0].split()[1] for lines in first]
    assert ids[0] != ids[1] and ids[0].endswith("-gpu0") and ids[1].endswith("-gpu3")
    assert ids[0] == resolve_identity("auto", {"RIBBON_GPU_INDEX": "0"})  # what the worker itself would use
    assert "--model m --port 9465" in first[1][0]
    assert [lines[-1] for lines in first] == ["term", "term"] and rc == [0]  # SIGTERM reached both; both drained


def test_sigterm_is_forwarded_and_a_child_that_ignores_it_is_killed(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "FAKE_OUT": str(tmp_path / "out")}
    children = make_children([0, 1], ["run"], 0, "cpu", env)
    children[0].command = [sys.executable, "-c", OBEDIENT]
    children[1].command = [sys.executable, "-c", STUBBORN]
    sup = Supervisor(children, stop_timeout_s=1.5)
    rc: list[int] = []
    t = threading.Thread(target=lambda: rc.append(sup.run()))
    t.start()
    try:
        _wait_for(lambda: all((tmp_path / f"out-{g}").exists() for g in (0, 1)), 30, "both children up")
    finally:
        sup.on_signal(signal.SIGTERM, None)
        t.join(30)
    assert (tmp_path / "out-0").read_text().splitlines()[-1] == "term"
    assert children[1].proc.returncode == -signal.SIGKILL  # past stop_timeout_s: killed, not waited on forever
    assert rc == [EXIT_FAILED]


def test_a_child_with_a_bad_setting_stops_them_all_instead_of_restarting(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "FAKE_OUT": str(tmp_path / "out")}
    children = make_children([0, 1], ["run"], 0, "cpu", env)
    children[0].command = [sys.executable, "-c", OBEDIENT]
    # exits 2 as a worker does on a bad setting, once its sibling is up (so the sibling is stopped, not never started)
    children[1].command = [sys.executable, "-c", "import os, sys, time\n"
                           f"while not os.path.exists({str(tmp_path / 'out-0')!r}): time.sleep(0.02)\n"
                           "sys.exit(2)"]
    sup = Supervisor(children, stop_timeout_s=10)
    rc: list[int] = []
    t = threading.Thread(target=lambda: rc.append(sup.run()))
    t.start()
    t.join(30)
    assert not t.is_alive() and rc == [EXIT_USAGE]  # on its own, without a signal
    assert children[1].codes == [2] and children[1].restarts == 0
    assert (tmp_path / "out-0").read_text().splitlines()[-1] == "term"  # the healthy sibling drained
