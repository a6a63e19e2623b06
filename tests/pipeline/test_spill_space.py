"""The dead-letter spill file stays bounded by what waits (over a long backlog, in any commit order), and a
full disk keeps values in memory instead of failing (worker/pipeline/spill.py)."""

from __future__ import annotations

import errno
import gc
import logging
import os
import random
from collections import deque

import pytest

import worker.pipeline.spill as spill
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.spill import Spilled, Spool
from worker.pipeline.tracker import OffsetTracker

SLACK = 256 << 10


def disk_bytes(directory) -> int:
    """What the process's spill files in `directory` take on disk: they are unlinked, so they are found
    among the process's open files (Linux's /proc/self/fd), old ones left open included."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(f"{directory}/ribbon-spill-"):
                total += os.stat(f"/proc/self/fd/{fd}").st_size
        except FileNotFoundError:  # the listing's own descriptor, closed already
            continue
    return total


def test_the_file_stays_bounded_by_what_waits_over_a_long_backlog(tmp_path):
    """A slow partition holds every 7th value for a long time while the others commit a few steps behind:
    the file never holds much more than what waits, though ten times that passes through it."""
    rng = random.Random(28)
    spool = Spool(threshold=1000, directory=str(tmp_path), slack=SLACK)
    fast: deque[tuple[bytes, Spilled]] = deque()
    slow: deque[tuple[bytes, Spilled]] = deque()
    written = peak_held = 0
    for i in range(3000):
        value = bytes([i % 251]) * rng.randrange(1000, 12_000)
        written += len(value)
        (slow if i % 7 == 0 else fast).append((value, spool.hold(value)))
        peak_held = max(peak_held, spool.held_bytes)
        assert disk_bytes(tmp_path) <= 2 * spool.held_bytes + SLACK, i  # as it grows: bounded by what waits
        while len(fast) > 40:  # commits come a few dozen values behind
            v, h = fast.popleft()
            assert h.read() == v
        if len(slow) > 150:  # the slow partition lets go of its oldest in a burst
            for _ in range(100):
                v, h = slow.popleft()
                assert h.read() == v
        gc.collect(0)
    assert written > 10 * peak_held
    assert all(h.read() == v for v, h in [*fast, *slow])  # values moved by compaction read back exactly
    fast.clear()
    slow.clear()
    h = None  # the loop's last reference
    gc.collect()
    assert spool.held_bytes == 0 and disk_bytes(tmp_path) == 0


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _no_space(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


class Tries:
    """A failing disk call that counts how often it is tried."""

    def __init__(self, fail) -> None:
        self.fail, self.n = fail, 0

    def __call__(self, *a, **k):
        self.n += 1
        return self.fail(*a, **k)


@pytest.mark.parametrize("where", ["pwrite", "mkstemp", "short write"])
def test_a_full_disk_keeps_values_in_memory_then_spills_again_later(monkeypatch, caplog, where):
    clock = Clock()
    spool = Spool(threshold=10, retry_s=60.0, clock=clock)
    tries = Tries(_no_space if where != "short write" else lambda fd, data, pos: 0)
    monkeypatch.setattr(*((spill.tempfile, "mkstemp") if where == "mkstemp" else (spill.os, "pwrite")), tries)
    big = b"x" * 100
    with caplog.at_level(logging.WARNING, logger="worker.pipeline.spill"):
        assert spool.hold(big) is big and spool.hold(big) is big  # the second one does not try the disk
    assert tries.n == 1 and spool.held_bytes == 0
    assert len([r for r in caplog.records if "spill file failed" in r.getMessage()]) == 1
    monkeypatch.undo()
    clock.t = 61.0  # past retry_s: the disk is tried again
    held = spool.hold(big)
    assert isinstance(held, Spilled) and held.read() == big


def test_compaction_on_a_full_disk_keeps_the_old_file_and_every_value(monkeypatch):
    spool = Spool(threshold=10, slack=100)
    keep = [spool.hold(bytes([i]) * 50) for i in range(4)]
    drop = [spool.hold(b"d" * 50) for _ in range(10)]
    del drop
    gc.collect()
    monkeypatch.setattr(spill.tempfile, "mkstemp", _no_space)  # the compaction's fresh file
    value = b"n" * 50
    assert spool.hold(value) is value  # kept in memory
    assert [h.read() for h in keep] == [bytes([i]) * 50 for i in range(4)]


def test_a_dead_letter_on_a_full_disk_completes_its_offset(monkeypatch):
    monkeypatch.setattr(spill.os, "pwrite", _no_space)
    tracker = OffsetTracker()
    epoch = tracker.assign(("in", 0))
    tracker.see(("in", 0), epoch, 0)
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=lambda: None,
                     spool=Spool(threshold=10))
    assert dl.send(("in", 0), epoch, 0, b"k", b"v" * 1000, "schema", "bad")
    (ready,) = tracker.take_ready()
    assert ready.records[0].value == b"v" * 1000


def test_the_pods_tmp_has_a_size():
    import yaml
    from helpers import ROOT

    docs = list(yaml.safe_load_all((ROOT / "deploy" / "k8s" / "base" / "statefulset.yaml").read_text()))
    pod = next(d for d in docs if d and d["kind"] == "StatefulSet")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    tmp = next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
    volume = next(v for v in pod["volumes"] if v["name"] == tmp)
    assert volume["emptyDir"]["sizeLimit"].endswith("Gi") and int(volume["emptyDir"]["sizeLimit"][:-2]) >= 1
