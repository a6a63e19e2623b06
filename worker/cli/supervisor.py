"""`ribbon run --gpus all|0,1,...`: one worker process per GPU, supervised.

The supervisor owns only child processes; it loads no model and opens no Kafka
client. Each child is `ribbon run` with the same flags, plus:
- `CUDA_VISIBLE_DEVICES=<gpu>` and `--device cuda:0` (pinned to its GPU); with
  `--device cpu` the GPUs are names only ("fake devices", used by the tests);
- `RIBBON_GPU_INDEX=<gpu>`: its identity gets `-gpu<gpu>` (worker/kafka/identity.py),
  so the children of one host never share a transactional.id;
- `--port <server.port + i>` for the i-th child: one metrics/health endpoint per
  child (port 0 keeps every child's server off).

Life cycle: a child that exits while the supervisor is not stopping is started
again after a back-off (1 s, doubling to 30 s; back to 1 s once a child has run
for 60 s). A child that exits 2 (a bad setting or invocation: every child has
the same settings, and a restart cannot fix them) stops them all, and the
supervisor exits 2. SIGTERM/SIGINT is forwarded to every child, which drains and
commits; the supervisor waits for all of them (up to drain_timeout_s + 30 s,
then SIGKILL) and exits 0 if every child exited 0, else 1. A second signal is
forwarded as well (the children then exit at once). Children run in their own
session (a terminal's Ctrl-C reaches them once, through the supervisor) and get
SIGTERM if the supervisor dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from worker.config.errors import EXIT_FAILED, EXIT_USAGE, StartupError
from worker.kafka.identity import GPU_INDEX_ENV
from worker.observability.logs import setup_logging

log = logging.getLogger("ribbon.supervisor")

BACKOFF_START_S, BACKOFF_MAX_S, HEALTHY_AFTER_S = 1.0, 30.0, 60.0


def parse_gpus(spec: str, count: Any = None) -> list[int]:
    """'all' -> every visible CUDA device; '0,2' -> [0, 2]. StartupError (exit 2) if none or malformed."""
    if spec == "all":
        if count is None:
            import torch  # noqa: PLC0415 torch (~1.5 s) only for --gpus all

            count = torch.cuda.device_count()
        if not count:
            raise StartupError(None, "--gpus all: no CUDA device is visible (name them, e.g. --gpus 0,1, "
                                     "with --device cpu to run on CPU)")
        return list(range(count))
    try:
        gpus = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        gpus = []
    if not gpus or min(gpus) < 0 or len(set(gpus)) != len(gpus):
        raise StartupError(None, f"--gpus takes all or distinct indexes like 0,1, got {spec!r}")
    return gpus


def child_argv(argv: list[str], port: int, device: str) -> list[str]:
    """The parent's `run` flags without --gpus, --port and --device, then this child's --port and --device."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in ("--gpus", "--port", "--device"):
            skip = "=" not in a
            continue
        out.append(a)
    return [*out, "--port", str(port), "--device", device]


def _pdeathsig_term() -> None:  # in the child, between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


@dataclass
class Child:
    gpu: int
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    backoff_s: float = BACKOFF_START_S
    due: float = 0.0
    codes: list[int] = field(default_factory=list)
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "worker"])  # tests: a fake child

    def start(self, now: float) -> None:
        self.proc = subprocess.Popen([*self.command, *self.argv], env=self.env,
                                     start_new_session=True, preexec_fn=_pdeathsig_term)
        self.started = now
        log.info("child gpu%d started pid %d", self.gpu, self.proc.pid)


class Supervisor:
    def __init__(self, children: list[Child], stop_timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.children, self.stop_timeout_s, self.clock = children, stop_timeout_s, clock
        self.signals: list[int] = []
        self.wake = threading.Event()
        self.usage_error: Child | None = None  # a child that exited 2: a bad setting, the same for every child

    def on_signal(self, signum: int, _frame: Any) -> None:
        self.signals.append(signum)
        self.wake.set()
        for c in self.children:  # forwarded at once: the children drain in parallel
            if c.proc is not None and c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM if signum == signal.SIGTERM else signum)

    def run(self) -> int:
        for c in self.children:
            c.start(self.clock())
        while not self.signals and self.usage_error is None:
            now = self.clock()
            for c in self.children:
                self._tend(c, now)
            self.wake.wait(0.2)
        if self.usage_error is not None:  # restarting cannot fix a setting: stop the others, exit 2
            log.error("child gpu%d exited with code %d (a bad setting or invocation; its line above names it): "
                      "stopping every child", self.usage_error.gpu, EXIT_USAGE)
            for c in self.children:
                if c.proc is not None and c.proc.poll() is None:
                    c.proc.send_signal(signal.SIGTERM)
            self._stop()
            return EXIT_USAGE
        return self._stop()

    def _tend(self, c: Child, now: float) -> None:
        if c.proc is None:
            if now >= c.due:
                c.restarts += 1
                log.warning("child gpu%d restarting (restart %d)", c.gpu, c.restarts)
                c.start(now)
            return
        code = c.proc.poll()
        if code is None:
            if now - c.started > HEALTHY_AFTER_S:
                c.backoff_s = BACKOFF_START_S
            return
        c.codes.append(code)
        if code == EXIT_USAGE:
            self.usage_error = c
            return
        c.proc, c.due = None, now + c.backoff_s
        log.warning("child gpu%d exited with code %d; restarting in %.0f s", c.gpu, code, c.backoff_s)
        c.backoff_s = min(BACKOFF_MAX_S, c.backoff_s * 2)

    def _stop(self) -> int:
        log.info("stopping: waiting for %d children to drain (up to %.0f s)", len(self.children), self.stop_timeout_s)
        deadline = time.monotonic() + self.stop_timeout_s  # real time: children drain in real time
        ok = True
        for c in self.children:
            if c.proc is None:
                continue
            try:
                code = c.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("child gpu%d did not stop in time: killed", c.gpu)
                os.killpg(c.proc.pid, signal.SIGKILL)
                code = c.proc.wait()
            log.info("child gpu%d stopped with code %d", c.gpu, code)
            ok = ok and code == 0
        return 0 if ok else EXIT_FAILED


def make_children(gpus: list[int], argv: list[str], base_port: int, device: str,
                  environ: Mapping[str, str]) -> list[Child]:
    """One child per GPU: its own GPU index (identity `-gpuN`), port base + i (0: off), pinned GPU on CUDA."""
    children = []
    for i, gpu in enumerate(gpus):
        env = {**environ, GPU_INDEX_ENV: str(gpu)}
        if device != "cpu":
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        port = base_port + i if base_port else 0
        children.append(Child(gpu, child_argv(argv, port, device), env))
    return children


def run_supervisor(settings: Any, args: Any) -> int:
    if not settings.kafka.bootstrap_servers:
        raise StartupError("kafka.bootstrap_servers", "--gpus needs a Kafka cluster the children share "
                           "(the embedded broker lives inside one process)", "host:port[,host:port]")
    gpus = parse_gpus(args.gpus, 0 if settings.engine.device == "cpu" and args.gpus == "all" else None)
    setup_logging(settings.log_level, settings.log_format)
    base_port = settings.server.port
    device = "cpu" if settings.engine.device == "cpu" else "cuda:0"
    children = make_children(gpus, list(args.argv), base_port, device, os.environ)
    sup = Supervisor(children, stop_timeout_s=settings.drain_timeout_s + 30.0)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, sup.on_signal)
    log.info("supervising %d workers on GPUs %s (metrics ports %s)", len(children), gpus,
             [base_port + i for i in range(len(gpus))] if base_port else "off")
    return sup.run()
