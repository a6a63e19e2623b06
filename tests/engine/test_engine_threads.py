"""model.cpu_threads: the loader sets torch's intra-op thread count when the model runs on CPU."""

from __future__ import annotations

import pytest
import torch

from worker.engine.loader import apply_cpu_threads, load_engine
from worker.engine.tiny import make_tiny_checkpoint
from worker.config.settings import ModelSettings, SettingsError, load_settings


@pytest.fixture
def threads():
    """Start every test from 2 threads (so setting 1 is a visible change); restore afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    assert torch.get_num_threads() == 2
    yield
    torch.set_num_threads(before)


def test_loading_on_cpu_with_one_thread_sets_torch_threads(threads, tmp_path):
    path = make_tiny_checkpoint(tmp_path / "tiny", arch="qwen2", seed=0)
    eng = load_engine(ModelSettings(path=str(path), cpu_threads=1), device="cpu")
    assert eng.device.type == "cpu"
    assert torch.get_num_threads() == 1


def test_explicit_count_wins_over_the_core_count(threads):
    assert apply_cpu_threads(3, cores=2) == 3
    assert torch.get_num_threads() == 3


def test_auto_is_one_thread_on_two_cores_or_fewer(threads):
    assert apply_cpu_threads(None, cores=2) == 1
    assert torch.get_num_threads() == 1


def test_auto_leaves_torch_alone_on_more_cores(threads):
    assert apply_cpu_threads(None, cores=16) == 2
    assert torch.get_num_threads() == 2


def test_zero_threads_is_refused():
    with pytest.raises(ValueError, match="cpu_threads"):
        apply_cpu_threads(0)
    with pytest.raises(SettingsError, match="RIBBON_MODEL__CPU_THREADS"):
        load_settings(environ={"RIBBON_MODEL__CPU_THREADS": "0"})
