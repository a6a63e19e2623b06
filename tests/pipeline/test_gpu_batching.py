"""The batching policies' room and the packer's one rule of when a bin is cut for it (pure: no threads)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from worker.packer import PackerConfig, Room
from worker.packer.room import cut
from worker.pipeline.gpu_batching import BinAtATime, Continuous

CONFIG = PackerConfig(budget=1_000, reserve_per_seq=4, max_seqs=8)


@dataclass
class InFlight:
    docs: int = 0
    weight: int = 0
    n_bins: int = 0

    def bins(self) -> int:
        return self.n_bins


@pytest.mark.parametrize("bins, room", [(0, Room.FREE), (1, Room.BACKLOG), (2, Room.NONE)])
def test_a_bin_at_a_time_has_room_for_one_running_bin_and_one_queued_in_a_backlog(bins, room):
    assert BinAtATime().room(InFlight(docs=bins, n_bins=bins), CONFIG) is room


@pytest.mark.parametrize("docs, weight, room", [(0, 0, Room.FREE), (7, 999, Room.FREE), (8, 10, Room.QUEUE),
                                                (3, 1_000, Room.QUEUE), (15, 1_999, Room.QUEUE),
                                                (16, 10, Room.NONE), (3, 2_000, Room.NONE)])
def test_continuous_has_room_while_seats_and_budget_are_free_and_a_queue_of_twice_that(docs, weight, room):
    assert Continuous().room(InFlight(docs=docs, weight=weight, n_bins=1), CONFIG) is room


class Packer:
    def __init__(self, full: bool, draining: bool = False, settled: bool = False) -> None:
        self.full, self.draining, self.settled, self.asked = full, draining, settled, []

    def full_bin_pending(self) -> bool:
        return self.full

    def input_settled(self) -> bool:
        return self.settled or self.draining

    def next_bin(self, timeout_s: float):
        self.asked.append(timeout_s)
        return "bin"


@pytest.mark.parametrize("room, full, cuts", [(Room.FREE, False, True), (Room.FREE, True, True),
                                              (Room.BACKLOG, True, True), (Room.BACKLOG, False, False),
                                              (Room.NONE, True, False)])
def test_the_packer_cuts_for_free_room_and_for_a_backlog_only_with_a_full_bin_pending(room, full, cuts):
    p = Packer(full)
    assert (cut(p, room, 0.05) == "bin") is cuts and p.asked == ([0.05] if cuts else [])


@pytest.mark.parametrize("room, full, draining, settled, cuts", [
    (Room.BACKLOG, False, True, True, True),     # draining: nothing more joins the pending documents
    (Room.BACKLOG, False, False, True, False),   # a bin at a time: input gone quiet is no reason to queue
    (Room.QUEUE, True, False, False, True),      # continuous: a full bin pending
    (Room.QUEUE, False, False, False, False),    # documents still arriving: they may join the bin
    (Room.QUEUE, False, False, True, True),      # none arrived for max_wait_s: waiting would not fill it
    (Room.QUEUE, False, True, False, True),      # draining
    (Room.NONE, True, True, True, False)])
def test_a_queue_ahead_takes_a_partial_bin_once_nothing_more_arrives_for_it(room, full, draining, settled, cuts):
    p = Packer(full, draining, settled)
    assert (cut(p, room, 0.05) == "bin") is cuts and p.asked == ([0.05] if cuts else [])
