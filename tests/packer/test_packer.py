"""The Python facade of the packer: bins, errors, ring, stats, GIL release."""

import threading
import time

import numpy as np
import pytest

from worker.packer import Bin, Packer, PackerConfig
from worker.config.settings import BatchingSettings


def make(**kw) -> Packer:
    args = {"budget": 256, "reserve_per_seq": 8, "max_seqs": 16, "efficient_tokens": 1, "max_wait_s": 0.0,
            "alignment": 16, "slots": 2}
    args.update(kw)
    device = args.pop("device", "cpu")
    return Packer(PackerConfig(**{"order": "decreasing", **args}), device=device)


def reconstruct(b: Bin) -> dict[int, list[int]]:
    cu = np.asarray(b.cu_seqlens)
    toks = np.asarray(b.tokens)
    return {int(s): toks[cu[i] : cu[i + 1]].tolist() for i, s in enumerate(b.seq_ids)}


def test_bin_reconstructs_inputs_and_pads_only_the_end():
    with make(pad_token=-1) as p:
        p.submit(1, [5, 6, 7], key=0)
        p.submit(2, np.array([8, 9], dtype=np.int64), key=0)
        b = p.next_bin(5.0)
        assert b is not None
        assert reconstruct(b) == {1: [5, 6, 7], 2: [8, 9]}
        assert b.num_tokens == 5 and len(b.tokens) == 16 and b.max_seqlen == 3
        assert b.tokens.dtype == np.int32 and b.cu_seqlens.dtype == np.int32 and b.seq_ids.dtype == np.int64
        assert (np.asarray(b.tokens)[5:] == -1).all()
        assert b.weight == 5 + 2 * 8


def test_bin_arrays_are_views_of_the_slot_not_copies():
    with make() as p:
        p.submit(1, [1, 2, 3], key=0)
        b = p.next_bin(5.0)
        assert not b.tokens.flags.owndata and not b.cu_seqlens.flags.owndata and not b.seq_ids.flags.owndata
        assert np.shares_memory(b.tokens, p._tokens[b.slot])


def test_submit_refuses_too_long_with_lengths_in_message_and_never_truncates():
    with make() as p:
        with pytest.raises(ValueError, match=r"249 tokens.*weighs 257.*budget 256"):
            p.submit(7, np.ones(249, dtype=np.int32), key=0)
        p.submit(8, np.ones(248, dtype=np.int32), key=0)  # exactly the budget
        b = p.next_bin(5.0)
        assert b.num_tokens == 248
        assert p.stats().pending_seqs == 0


def test_submit_rejects_empty_non_integer_and_out_of_range_tokens():
    with make() as p:
        with pytest.raises(ValueError, match="empty"):
            p.submit(1, [], key=0)
        with pytest.raises(ValueError, match="integers"):
            p.submit(2, [1.5, 2.0], key=0)
        with pytest.raises(ValueError, match="int32"):
            p.submit(3, [2**40], key=0)


def test_release_recycles_slots_and_rejects_double_release():
    with make(slots=2) as p:
        for i in range(3):
            p.submit(i, np.full(200, i, dtype=np.int32), key=0)
        a, b = p.next_bin(5.0), p.next_bin(5.0)
        assert {a.slot, b.slot} == {0, 1}
        assert p.next_bin(0.05) is None  # ring full: the packer waits, nothing is allocated
        assert p.stats().slot_waits >= 1
        p.release(a.slot)
        c = p.next_bin(5.0)
        assert c.slot == a.slot and reconstruct(c) == {2: [2] * 200}
        with pytest.raises(ValueError, match="not handed out"):
            p.release(a.slot + 5)
        p.release(b.slot)
        with pytest.raises(ValueError, match="not handed out"):
            p.release(b.slot)


def test_cancel_returns_pending_ids_of_the_key_and_pending_tokens_per_key():
    with make() as p:
        p.submit(1, [1] * 10, key=3)
        p.submit(2, [1] * 20, key=4)
        p.submit(3, [1] * 30, key=3)
        assert p.pending_tokens(3) == 40 and p.pending_tokens(4) == 20
        assert p.cancel(3) == [1, 3]
        assert p.pending_tokens(3) == 0
        b = p.next_bin(5.0)
        assert b.seq_ids.tolist() == [2]
        assert p.stats().cancelled_seqs == 2


def test_close_returns_none_and_refuses_submit():
    p = make()
    p.close()
    assert p.closed
    assert p.next_bin(1.0) is None
    with pytest.raises(RuntimeError, match="close"):
        p.submit(1, [1], key=0)


def test_stats_fill_ratio_and_counts():
    with make(budget=100, reserve_per_seq=0, alignment=1) as p:
        p.submit(1, [1] * 60, key=0)
        p.submit(2, [1] * 40, key=0)
        b = p.next_bin(5.0)
        s = p.stats()
        assert b.num_tokens == 100
        assert s.bins_emitted == 1 and s.seqs_emitted == 2 and s.tokens_emitted == 100
        assert s.fill_ratio == pytest.approx(1.0)
        assert s.arrival_rate_tokens_per_s > 0


def test_window_holds_a_small_bin_while_more_is_expected():
    """A burst then silence: the window waits for the projected fill, then gives up
    when the decaying rate estimate can no longer fill the bin before the limit."""
    # 2000 tokens at once: estimated rate ~2000 / 0.25 s = 8000/s, so the missing 500
    # to the efficient 2500 would come within the 0.2 s limit: the window waits.
    with make(budget=4096, reserve_per_seq=0, max_seqs=64, efficient_tokens=2500, max_wait_s=0.2) as p:
        for i in range(50):
            p.submit(i, [1] * 40, key=0)
        b = p.next_bin(10.0)
        assert b is not None
        assert b.reason == "rate_low"
        assert b.oldest_wait_s >= 500 / 8000  # at least the first projected fill time
        assert sorted(b.seq_ids.tolist()) == list(range(50))
        assert p.stats().waits == 1 and p.stats().released_rate_low == 1


def test_drain_releases_without_waiting():
    # Same stream as above, but a 30 s limit: only drain() makes it go now.
    with make(budget=4096, reserve_per_seq=0, max_seqs=64, efficient_tokens=2500, max_wait_s=30.0,
              latency_target_s=60.0) as p:
        for i in range(50):
            p.submit(i, [1] * 40, key=0)
        assert p.next_bin(0.2) is None  # held back by the window
        p.drain()
        b = p.next_bin(10.0)
        assert b is not None and b.reason == "drain" and len(b.seq_ids) == 50


def test_torch_cpu_ring_gives_tensor_views():
    torch = pytest.importorskip("torch")
    with make(device="torch-cpu") as p:
        p.submit(1, [4, 5, 6], key=0)
        b = p.next_bin(5.0)
        assert isinstance(b.tokens, torch.Tensor) and b.tokens.dtype == torch.int32
        assert b.tokens.data_ptr() == p._tokens[b.slot].data_ptr()  # a view of the slot
        assert b.tokens[:3].tolist() == [4, 5, 6] and b.cu_seqlens.tolist() == [0, 3]


def test_from_settings_maps_every_field():
    s = BatchingSettings(token_budget=512, max_seqs_per_bin=7, efficient_tokens=300, max_wait_ms=25.0,
                         latency_target_ms=900.0, order="decreasing")
    with Packer.from_settings(s, budget=512, reserve_per_seq=32) as p:
        c = p.config
        assert (c.efficient_tokens, c.max_wait_s, c.latency_target_s, c.order) == (300, 0.025, 0.9, "decreasing")
        assert len(p._tokens) == 3 and len(p._tokens[0]) == 512 and len(p._ids[0]) == 7  # 3 slots: no setting
        for i in range(8):
            p.submit(i, [1, 2], key=0)
        b = p.next_bin(5.0)
        assert len(b.seq_ids) == 7  # max_seqs_per_bin
        assert len(b.tokens) % 16 == 0  # aligned to 16: no setting


def test_next_bin_releases_the_gil_while_it_blocks():
    """A Python thread keeps running while another thread is blocked in next_bin."""
    with make() as p:
        entered, result = threading.Event(), []

        def consumer():
            entered.set()
            result.append(p.next_bin(30.0))

        t = threading.Thread(target=consumer)
        t.start()
        entered.wait()
        time.sleep(0.05)
        count, end = 0, time.monotonic() + 0.3
        while time.monotonic() < end:  # pure Python work; needs the GIL
            count += 1
        # Had next_bin held the GIL, this loop could not have run until it returned.
        assert t.is_alive(), "next_bin returned early"
        assert count > 1000
        p.close()
        t.join(10)
        assert not t.is_alive() and result == [None]


def test_each_bin_takes_the_oldest_of_every_key_first():
    """Offsets commit in order per partition: a bin advances every key's head before filling by size."""
    with make(max_seqs=16) as p:  # budget 256, reserve 8
        for sid, key in ((10, 0), (11, 0), (12, 0)):
            p.submit(sid, [1] * 60, key=key)  # weight 68 each
        p.submit(13, [2] * 40, key=1)  # weight 48: head of key 1
        p.submit(14, [3] * 40, key=2)  # weight 48: head of key 2 (decreasing size alone would leave it out)
        b = p.next_bin(5.0)
        assert b is not None
        assert set(b.seq_ids.tolist()) == {10, 13, 14, 11}
        assert b.weight <= 256


def test_a_full_bin_is_pending_once_the_pending_documents_fill_its_seats_or_its_budget():
    p = make(budget=100, reserve_per_seq=4, max_seqs=3)
    assert not p.full_bin_pending()
    p.submit_many([(1, [1] * 10, 0), (2, [1] * 10, 0)])
    assert not p.full_bin_pending()  # 2 of 3 seats, weight 28 of 100
    p.submit(3, [1] * 10, 0)
    assert p.full_bin_pending()  # every seat taken
    q = make(budget=100, reserve_per_seq=4, max_seqs=8)
    q.submit_many([(1, [1] * 60, 0), (2, [1] * 32, 0)])
    assert q.full_bin_pending()  # weight 100 of 100
    p.close(), q.close()


def test_the_input_settles_when_nothing_arrived_for_ten_waits_or_the_packer_drains():
    now = [100.0]
    p = Packer(PackerConfig(budget=100, reserve_per_seq=4, max_seqs=8, max_wait_s=0.05), clock=lambda: now[0])
    assert not p.input_settled()  # nothing pending
    p.drain(True)
    assert not p.input_settled()  # draining, but nothing pending
    p.drain(False)
    p.submit(1, [1] * 10, 0)
    assert not p.input_settled()  # it just arrived: more may join it
    now[0] += 0.49
    assert not p.input_settled()  # a steady stream's documents come within a few waits of each other
    now[0] += 0.02
    assert p.input_settled()  # ten of the window's waits (max_wait_s) without a document
    p.submit_many([(2, [1] * 10, 0)])
    assert not p.input_settled()
    p.drain(True)
    assert p.input_settled()  # a drain takes no new input
    p.drain(False)
    assert not p.input_settled()
    now[0] += 1.0
    assert p.next_bin(1.0) is not None  # the window releases them (they waited past max_wait_s)
    assert not p.input_settled()  # nothing pending any more
    p.close()
