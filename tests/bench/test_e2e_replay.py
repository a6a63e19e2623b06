"""bench.e2e_replay: the packer's cut of a backlog, the cost model's sum, and a replay through the real batcher
(the documents it hands back, its prefills with the backlog merge off and on)."""

from __future__ import annotations

from bench.e2e_replay import CostModel, packer_bins, replay, steady_bins, tiny_engine


def test_a_backlog_is_cut_by_the_real_packer_at_the_seats_or_the_budget():
    assert packer_bins([10] * 7, seats=3, budget=1_000, reserve=5) == [[0, 1, 2], [3, 4, 5], [6]]
    # 110 + 110 + 110 > 250: the arrival prefix of two, then the shortest that fits
    assert packer_bins([100, 100, 100, 10], seats=8, budget=250, reserve=10) == [[0, 1, 3], [2]]


def test_the_cost_of_a_step_adds_its_prefill_and_its_decode_steps_in_their_bucket():
    c = CostModel(prefill_fixed_s=1.0, prefill_token_s=0.1, decode_fixed_s=2.0, decode_row_s=0.5)
    assert c.step(10, 0, 0) == (2.0, 0.0)
    assert c.step(0, 3, 5) == (0.0, 3 * (2.0 + 0.5 * 6))  # 5 rows run in the bucket of 6


def test_a_steady_load_spreads_the_documents_over_bins_at_its_rate():
    bins = steady_bins(10, rate=100.0, every=0.02)
    assert [d for _, ids in bins for d in ids] == list(range(10)) and bins[0] == (0.0, [0, 1]) and bins[1] == (0.02, [2, 3])


def test_the_replay_hands_every_document_back_and_merges_split_cohorts(tmp_path):
    eng = tiny_engine(tmp_path / "tiny", max_new=6, check_every=2)
    lengths = [5 + i % 7 for i in range(36)]
    starts = [0, 2, 10, 18, 26, 34, 36]  # the first bin of 2 starts alone
    bins = [(0.001 * i, list(range(a, b))) for i, (a, b) in enumerate(zip(starts, starts[1:]))]
    got = {}
    for merge in (0, 2):
        b = eng.batcher(8, 400, 1_000, 0.25, lag=1)
        b.sched.merge_steps = merge
        got[merge] = r = replay(eng, b, lengths, bins, CostModel())
        assert r["documents"] == 36 and r["output_tokens"] == 36 * 6 and r["gpu_s"] > 0
    assert got[2]["prefill_forwards"] < got[0]["prefill_forwards"]
    assert [p["rows_after"] for p in got[2]["prefills"]][2:4] == [8, 8]  # one cohort of all seats
