"""The garbage-collector watch (worker/observability/gcwatch.py): pauses timed by generation, and start-up
objects frozen out of later collections, then given back."""

from __future__ import annotations

import gc

from worker.observability.gcwatch import GcWatch, settle, unsettle
from worker.observability.metrics import Metrics


def test_each_collection_is_timed_under_its_generation_until_stopped():
    m = Metrics()
    watch = GcWatch(m.gc_pause).start()
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        watch.stop()
    get = m.registry.get_sample_value
    assert get("ribbon_gc_pause_seconds_count", {"generation": "2"}) >= 1
    assert get("ribbon_gc_pause_seconds_count", {"generation": "0"}) >= 1
    assert watch.longest_s > 0 and watch._callback not in gc.callbacks
    before = get("ribbon_gc_pause_seconds_count", {"generation": "2"})
    gc.collect(2)  # stopped: not counted
    assert get("ribbon_gc_pause_seconds_count", {"generation": "2"}) == before


def test_settle_freezes_what_is_alive_and_unsettle_gives_it_back():
    keep = [[i] for i in range(1000)]  # alive now: frozen
    try:
        frozen = settle()
        # other threads of this process may free a few frozen objects meanwhile: the count only falls,
        # and `keep` (alive) stays frozen
        assert frozen >= len(keep) and len(keep) <= gc.get_freeze_count() <= frozen
    finally:
        unsettle()
    assert gc.get_freeze_count() == 0
