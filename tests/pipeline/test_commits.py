"""The commit channel between ingest and delivery (worker/pipeline/commits.py), each side on its own thread."""

from __future__ import annotations

import threading

from confluent_kafka import TopicPartition
from helpers import wait_for
from stage_fakes import Wake

from worker.pipeline.commits import Commits
from worker.pipeline.tracker import OffsetTracker

TP = ("in", 0)


def revoking(commits: Commits, metadata: object) -> threading.Thread:
    """`commits.revoke(TP)` on its own thread, as ingest's revoke callback calls it."""
    t = threading.Thread(target=commits.revoke, args=([TP], metadata), daemon=True)
    t.start()
    return t


def test_a_revoke_waits_for_one_delivery_step_with_its_own_metadata_then_forgets_the_partition():
    tracker, wake = OffsetTracker(), Wake()
    tracker.assign(TP)
    commits = Commits(tracker, wake=wake)
    commits.publish("generation 1")
    t = revoking(commits, "generation 2")
    wait_for(lambda: wake.n == 1, 10, "the revoke to wake delivery")
    assert t.is_alive() and tracker.epoch(TP) is not None  # nothing forgotten before delivery's step
    steps: list = []
    commits.serve(lambda metadata: steps.append((metadata, tracker.epoch(TP) is not None)))
    t.join(10)
    assert not t.is_alive()
    assert steps == [("generation 2", True)]  # the step ran while the partition was still ours
    assert tracker.epoch(TP) is None and commits.group_metadata == "generation 1"


def test_a_closed_channel_forgets_revoked_partitions_at_once_without_a_step():
    tracker = OffsetTracker()
    tracker.assign(TP)
    commits = Commits(tracker)
    commits.close()
    commits.revoke([TP], "metadata")  # returns at once: no delivery thread to serve it
    assert tracker.epoch(TP) is None


def test_closing_releases_a_revoke_already_waiting_uncommitted():
    tracker = OffsetTracker()
    tracker.assign(TP)
    commits = Commits(tracker)
    t = revoking(commits, "metadata")
    wait_for(lambda: not commits._revokes.empty(), 10, "the revoke to be queued")
    commits.close()
    t.join(10)
    assert not t.is_alive() and tracker.epoch(TP) is None


def test_an_unserved_revoke_gives_up_after_its_timeout_and_forgets_the_partition():
    tracker = OffsetTracker()
    tracker.assign(TP)
    commits = Commits(tracker, timeout_s=0.1)
    commits.revoke([TP], "metadata")
    assert tracker.epoch(TP) is None


def test_posted_offsets_are_taken_once_the_latest_per_partition():
    commits = Commits(OffsetTracker())
    commits.post([TopicPartition("in", 0, 5), TopicPartition("in", 1, 2)])
    commits.post([TopicPartition("in", 0, 9)])
    assert sorted((tp.partition, tp.offset) for tp in commits.take()) == [(0, 9), (1, 2)]
    assert commits.take() == []
