"""Apache Kafka for the tests: one KRaft node (broker + controller) from Maven Central jars, no Docker.

`tests/kafka/pom.xml` pins the version. The jars are fetched once into
`~/.cache/ribbon/kafka-<version>/` (`mvn dependency:copy-dependencies`; set
RIBBON_KAFKA_JARS to use another folder), the storage is formatted with a
random cluster id (`kafka.tools.StorageTool format --standalone`) in a
temporary folder, and `kafka.Kafka` runs on two free loopback ports. The
transaction state log and the offsets topic have replication factor 1 and min
ISR 1 (one node), and the broker looks for expired transactions every second,
so a transaction held past its `transaction.timeout.ms` is aborted within about
a second of it (Apache Kafka's default is every 10 s).

`ApacheKafka` has the embedded broker's interface (`bootstrap`, `pid`,
`create_topics`, `start`, `stop`, a context manager), so a test written for one
runs on the other. It dies with the process that started it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from worker.kafka.broker import BrokerError, _die_with_parent, create_topics, free_port

POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
HEAP = "-Xmx384m"  # measured: bench/kafka_broker.py (RSS about 300 MB after start with this heap)

# Broker settings of a one-node test cluster; a test may override any (ApacheKafka(overrides=...)).
BASE_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",  # the tests' workers use 2 s sessions to leave a group fast
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "log.flush.interval.messages": "9223372036854775807",
}


def kafka_version(pom: Path = POM) -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if not m:
        raise BrokerError(f"{pom} names no kafka.version")
    return m.group(1)


def jars_dir(pom: Path = POM) -> Path:
    """The folder of the broker's jars, fetched with Maven on first use (BrokerError if that cannot be done)."""
    override = os.environ.get("RIBBON_KAFKA_JARS")
    folder = Path(override) if override else Path.home() / ".cache" / "ribbon" / f"kafka-{kafka_version(pom)}"
    if (folder / ".complete").is_file():
        return folder
    if shutil.which("java") is None:
        raise BrokerError("Apache Kafka tests need java (17 or newer) on PATH")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(f"Apache Kafka tests need mvn on PATH to fetch the broker's jars into {folder}")
    partial = folder.with_name(folder.name + f".part-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={partial}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BrokerError(f"fetching the Kafka jars failed ({' '.join(cmd)}): {(proc.stdout + proc.stderr)[-2000:]}")
    (partial / ".complete").write_text(kafka_version(pom))
    if (folder / ".complete").is_file():  # another session finished first
        shutil.rmtree(partial, ignore_errors=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return folder


def cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what StorageTool random-uuid prints)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ApacheKafka:
    """A one-node Apache Kafka (KRaft) on loopback ports, its data in a temporary folder; a context manager."""

    def __init__(self, host: str = "127.0.0.1", log_path: str | Path | None = None,
                 overrides: Mapping[str, str] | None = None, heap: str = HEAP):
        self.host = host
        self.port = free_port(host)
        self.controller_port = free_port(host)
        self.log_path = Path(log_path) if log_path else None
        self.overrides = dict(overrides or {})
        self.heap = heap
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def properties(self, data: Path) -> dict[str, str]:
        return {**BASE_PROPERTIES,
                "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
                "log.dirs": str(data), **self.overrides}

    def _java(self, jars: Path, main: str, *args: str) -> list[str]:
        return ["java", self.heap, "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", "-cp", f"{jars}/*", main, *args]

    def start(self, timeout_s: float = 90.0) -> ApacheKafka:
        jars = jars_dir()
        self._dir = Path(tempfile.mkdtemp(prefix="ribbon-kafka-"))
        conf = self._dir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.properties(self._dir / "data").items()))
        out = subprocess.DEVNULL
        if self.log_path:
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            out = self._log_file
        fmt = subprocess.run(self._java(jars, "kafka.tools.StorageTool", "format", "-t", cluster_id(),
                                        "-c", str(conf), "--standalone"),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            self.stop()
            raise BrokerError(f"formatting Kafka storage failed: {(fmt.stdout + fmt.stderr)[-2000:]}")
        self._proc = subprocess.Popen(self._java(jars, "kafka.Kafka", str(conf)), stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=out, preexec_fn=_die_with_parent, close_fds=True)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        """Until the broker answers metadata with itself in it (the listener opens before that)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, "error_cb": lambda _e: None})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerError(f"Apache Kafka exited with code {code} at start; log: {self.log_path}")
            try:
                if admin.list_topics(timeout=1.0).brokers:
                    return
            except KafkaException:
                pass
            time.sleep(0.1)
        raise BrokerError(f"Apache Kafka on {self.bootstrap} gave no metadata within {timeout_s:.0f} s; "
                          f"log: {self.log_path}")

    def create_topics(self, topics: Mapping[str, int] | Iterable[str], partitions: int = 1,
                      timeout_s: float = 30.0, config: Mapping[str, str] | None = None) -> None:
        """Create topics (name -> partitions, or names with `partitions` each); existing ones are kept."""
        create_topics(self.bootstrap, topics, partitions, timeout_s, config)

    def stop(self, grace_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGCONT)  # a frozen broker cannot shut down
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
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> ApacheKafka:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
