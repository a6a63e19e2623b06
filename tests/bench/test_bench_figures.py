"""The benchmark's derived figures (bench/timeline.py, steady.py): where the time beyond the
model's went, and where each document's latency went, computed from synthetic timelines."""

from __future__ import annotations

import numpy as np
import pytest

from bench.steady import stage_times, worker_share, windows
from bench.timeline import end_parts, overhead_parts


def _row(t, consumed=0, work=0.0, bins=0, docs=0):
    return {"t": t, "consumed": consumed, "work_s": work, "bins": bins, "model_documents": docs}


def test_overhead_parts_splits_the_time_beyond_the_model():
    # assigned at t=1.0; first document at 1.1; first bin starts at 1.3; two bins of 0.5 s with a
    # 0.1 s gap; the last ends at 2.4; the run (from the assignment) lasted 1.5 s
    timeline = [_row(1.0), _row(1.1, consumed=10), _row(1.3, consumed=10, work=0.001),
                _row(1.8, consumed=20, work=0.5, bins=1), _row(1.9, consumed=20, work=0.5, bins=1),
                _row(2.4, consumed=20, work=1.0, bins=2), _row(2.5, consumed=20, work=1.0, bins=2)]
    parts = overhead_parts(timeline, t_assigned=1.0, steady=1.5, busy=1.0, bins=2)
    assert parts == pytest.approx({"to_first_fetch": 0.1, "to_first_bin": 0.2, "between_bins": 0.1,
                                   "tail": 0.1, "tail_model": 0.0, "after_model": 0.1, "model_idle": 0.1})
    first_four = ("to_first_fetch", "to_first_bin", "between_bins", "tail")
    assert sum(parts[k] for k in first_four) == pytest.approx(1.5 - 1.0)  # the steady time less the model's


def test_overhead_parts_splits_the_tail_at_the_models_last_document():
    # continuous batching: the last bin is handed over at 1.5 while the model still works on earlier ones;
    # the model's last documents come back at 2.2 (its work is 1.0 s from 1.2); the last output is read at 2.5
    timeline = [_row(1.0), _row(1.1, consumed=10), _row(1.2, consumed=10, work=0.001),
                _row(1.5, consumed=20, work=0.3, bins=2, docs=4), _row(2.0, consumed=20, work=0.8, bins=2, docs=15),
                _row(2.2, consumed=20, work=1.0, bins=2, docs=20), _row(2.5, consumed=20, work=1.0, bins=2, docs=20)]
    parts = overhead_parts(timeline, t_assigned=1.0, steady=1.5, busy=1.0, bins=2)
    assert parts["tail"] == pytest.approx(1.0)  # from the last hand-over: the model's work on its bins included
    assert parts["tail_model"] == pytest.approx(0.7)  # the last hand-over to the model's last document
    assert parts["after_model"] == pytest.approx(0.3)  # the model's last document to the last output read
    assert parts["model_idle"] == pytest.approx(0.0)  # busy from its first bin to its last document


def test_overhead_parts_is_empty_when_no_bin_ran():
    assert overhead_parts([_row(0.1, consumed=3)], t_assigned=0.0, steady=1.0, busy=0.0, bins=0) == {}


def test_stages_split_each_latency_by_the_outputs_timing():
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    # latency 1.0 s; the worker held it 0.7 s (total), 0.3 s of which before the model started (queued)
    rows = [(1.0, {"queued": 300.0, "total": 700.0, "gpu": 1.0})] * 3 + [(2.0, {"queued": 1000.0, "total": 1500.0})]
    st = stage_times(rows, pct)
    assert st["outside_worker"]["p50"] == pytest.approx(0.3)
    assert st["poll_to_model"]["p50"] == pytest.approx(0.3) and st["poll_to_model"]["p99"] > 0.9
    assert st["model_to_finished"]["p50"] == pytest.approx(0.4)
    assert stage_times([], pct) == {}


def test_stages_split_the_workers_share_where_the_outputs_say_when_each_step_ended():
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    t = {"ingest": 20.0, "queued": 150.0, "model_done": 400.0, "total": 430.0, "gpu": 1.0}
    st = stage_times([(0.5, t)] * 4, pct)
    assert st["ingest"]["p50"] == pytest.approx(0.02) and st["packer_to_model"]["p50"] == pytest.approx(0.13)
    assert st["bin"]["p50"] == pytest.approx(0.25) and st["after_model"]["p50"] == pytest.approx(0.03)
    assert st["outside_worker"]["p50"] == pytest.approx(0.07)
    assert "bin" not in stage_times([(0.5, {**t, "model_done": 0.0})] * 4, pct)  # digest mode: no bins


def test_windows_give_each_stretch_of_the_run_its_own_percentiles():
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    rows = [(t * 0.5, 0.2) for t in range(40)] + [(25.0, 1.0)]  # produced over 20 s; one slow at 25 s
    w = windows(rows, pct)
    assert [x["from_s"] for x in w] == [0.0, 10.0, 20.0] and [x["n"] for x in w] == [20, 20, 1]
    assert w[0]["p99"] == pytest.approx(0.2) and w[2]["p50"] == pytest.approx(1.0)


def test_windows_show_which_stage_grew():
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    early = {"ingest": 20.0, "queued": 150.0, "model_done": 400.0, "total": 430.0}
    late = {**early, "ingest": 120.0, "queued": 250.0, "model_done": 500.0, "total": 530.0}  # ingest +0.1 s
    rows = [(1.0, 0.5, early)] * 5 + [(12.0, 0.6, late)] * 5 + [(13.0, 0.6, None)]  # one output without timing
    w = windows(rows, pct)
    assert w[0]["stages_p50_s"]["ingest"] == pytest.approx(0.02) and w[1]["stages_p50_s"]["ingest"] == pytest.approx(0.12)
    assert w[1]["stages_p50_s"]["bin"] == pytest.approx(w[0]["stages_p50_s"]["bin"])  # the bin did not grow
    assert w[1]["n"] == 6 and "stages_p50_s" not in windows([(1.0, 0.5)], pct)[0]


def test_the_workers_own_share_is_set_against_the_mean_bin():
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    share = worker_share(np.array([0.1] * 99 + [0.5]), 0.2, pct)
    assert share["worker_latency_s"]["p50"] == pytest.approx(0.1)
    assert share["worker_p99_over_mean_bin"] == pytest.approx(share["worker_latency_s"]["p99"] / 0.2)
    assert 0.1 < share["worker_latency_s"]["p99"] <= 0.5 and worker_share(np.array([]), 0.2, pct) == {}


def test_end_parts_split_the_end_at_the_last_commit_and_count_pauses():
    # every record consumed at 1.4, paused from 1.2 to 1.4 (and after, which does not count); the model's
    # last document back at 2.0, the last output committed at 2.2, read at 2.5 (assigned 1.0, steady 1.5)
    rows = [{**_row(1.0), "paused": 0, "produced": 0}, {**_row(1.2, consumed=10), "paused": 6, "produced": 0},
            {**_row(1.4, consumed=20), "paused": 6, "produced": 0},
            {**_row(2.0, consumed=20, docs=5), "paused": 6, "produced": 0},
            {**_row(2.2, consumed=20, docs=5), "paused": 0, "produced": 5}]
    parts = end_parts(rows, t_assigned=1.0, steady=1.5, records=20)
    assert parts == pytest.approx({"paused_s": 0.2, "model_to_committed": 0.2, "committed_to_read": 0.3})
