"""The loader's CPU threads: 1 torch thread on 2 cores or fewer, else torch's default (OMP_NUM_THREADS)."""

from __future__ import annotations

import pytest
import torch

from worker.config.settings import ModelRun, SettingsError, load_settings
from worker.engine.loader import apply_cpu_threads, load_engine
from worker.engine.tiny import make_tiny_checkpoint


@pytest.fixture
def threads():
    """Start every test from 2 threads (so setting 1 is a visible change); restore afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    assert torch.get_num_threads() == 2
    yield
    torch.set_num_threads(before)


def test_loading_on_cpu_on_two_cores_sets_one_torch_thread(threads, tmp_path, monkeypatch):
    from worker.engine import loader

    monkeypatch.setattr(loader, "usable_cores", lambda: 2)
    path = make_tiny_checkpoint(tmp_path / "tiny", arch="qwen2", seed=0)
    eng = load_engine(ModelRun(path=str(path)), device="cpu")
    assert eng.device.type == "cpu"
    assert torch.get_num_threads() == 1


def test_one_thread_on_two_cores_or_fewer(threads):
    assert apply_cpu_threads(cores=2) == 1
    assert torch.get_num_threads() == 1


def test_torch_left_alone_on_more_cores(threads):
    assert apply_cpu_threads(cores=16) == 2
    assert torch.get_num_threads() == 2


def test_the_thread_count_is_no_setting():
    with pytest.raises(SettingsError, match="RIBBON_MODEL__CPU_THREADS.*removed: derived"):
        load_settings(environ={"RIBBON_MODEL__CPU_THREADS": "2"})
