"""The embedded broker: starts, answers, creates topics, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from worker.kafka.broker import BrokerError, EmbeddedBroker, free_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_topics_created_with_partitions(broker, new_topic):
    from confluent_kafka.admin import AdminClient

    name = new_topic("parts", partitions=3)
    broker.create_topics({name: 3})  # existing topics are kept, no error
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert len(md.topics[name].partitions) == 3


def test_stop_leaves_no_process():
    b = EmbeddedBroker().start()
    pid = b.pid
    assert pid is not None and _alive(pid)
    b.stop()
    assert _wait_dead(pid)


def test_broker_dies_with_a_crashed_parent(tmp_path):
    """The caller is SIGKILLed (no cleanup runs): the broker must still go."""
    pid_file = tmp_path / "pid"
    code = ("import sys, time\n"
            "from worker.kafka.broker import EmbeddedBroker\n"
            "b = EmbeddedBroker().start()\n"
            f"open({str(pid_file)!r}, 'w').write(str(b.pid))\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    broker_pid = int(pid_file.read_text())
    assert _alive(broker_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    assert _wait_dead(broker_pid), "broker outlived its SIGKILLed parent"


def test_start_fails_clearly_when_port_is_taken(broker):
    host, port = broker.bootstrap.split(":")
    with pytest.raises(BrokerError, match="cannot listen"):
        EmbeddedBroker(host=host, port=int(port)).start(timeout_s=5)


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
