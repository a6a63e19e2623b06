"""The windowed capacity benchmark (bench/windows_capacity.py): the engine-only side runs exactly
the prompts the worker gave its packer, and the worker's overhead is figured as for documents."""

from __future__ import annotations

import numpy as np
import pytest

from bench.windows_capacity import RecordingPacker, overhead_pct
from worker.packer import PackerConfig


def _packer(budget: int = 256) -> RecordingPacker:
    return RecordingPacker(PackerConfig(budget=budget, reserve_per_seq=8, max_seqs=16, max_wait_s=0.01), "cpu")


def test_the_recording_packer_keeps_every_submitted_prompt_in_order_and_still_packs_them():
    p = _packer()
    given = [[5, 6, 7], [1] * 40, [9, 8]]
    p.submit(0, np.asarray(given[0], dtype=np.int32), 0)
    p.submit_many([(1, given[1], 3), (2, np.asarray(given[2]), 1)])
    given[0][0] = 99  # the recording is a copy
    assert [r.tolist() for r in p.submitted] == [[5, 6, 7], [1] * 40, [9, 8]]
    p.drain(True)
    b = p.next_bin(5.0)
    cu = np.asarray(b.cu_seqlens)
    packed = {int(s): np.asarray(b.tokens[cu[j]:cu[j + 1]]).tolist() for j, s in enumerate(b.seq_ids)}
    assert packed == {0: [5, 6, 7], 1: [1] * 40, 2: [9, 8]}
    p.close()


def test_a_refused_prompt_is_not_recorded():
    p = _packer(budget=64)
    with pytest.raises(ValueError):
        p.submit(0, [1] * 100, 0)  # longer than the budget
    with pytest.raises(ValueError):
        p.submit_many([(1, [1, 2], 0), (2, [1] * 100, 0)])  # all or nothing
    assert p.submitted == []
    p.close()


def test_overhead_is_the_share_of_the_engines_rate_the_worker_misses():
    assert overhead_pct(7.5, 10.0) == pytest.approx(25.0)
    assert overhead_pct(10.0, 10.0) == 0.0
    assert overhead_pct(12.0, 10.0) == pytest.approx(-20.0)  # faster than the engine alone: negative, as in e2e
    with pytest.raises(ValueError, match="engine's rate"):
        overhead_pct(1.0, 0.0)


def test_the_capacity_run_covers_every_record_on_the_cpu(tmp_path):
    """The whole benchmark on the tiny model and the embedded broker, as `bench/device_run.sh
    windows-capacity` runs it on the H200 (there with the defaults on CUDA)."""
    import json
    import subprocess
    import sys

    out = tmp_path / "capacity.json"
    r = subprocess.run([sys.executable, "-m", "bench.windows", "--capacity", "--device", "cpu", "--records", "400",
                        "--max-new-tokens", "2", "--timeout-s", "120", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    e2e = res["end_to_end"]
    assert e2e["drained"] and e2e["records_covered"] == 400 and e2e["windows"] >= 1
    assert res["engine_only"]["input_tokens"] == res["prompt_tokens"] > 0
    assert isinstance(res["worker_overhead_pct"], float)
