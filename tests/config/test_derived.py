"""What removed settings became: each value derived in one place from the settings that remain."""

from __future__ import annotations

from worker.config.model import cache_root, hub_offline
from worker.config.settings import load_settings, model_run
from worker.pipeline.backpressure import Watermarks
from worker.pipeline.configs import delivery_config, ingest_config
from worker.pipeline.lines import rules_of


def test_the_engine_run_takes_its_fields_from_the_model_generation_engine_and_batching_groups(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    s = load_settings(environ={}, overrides={"model.path": "m", "generation.max_new_tokens": 7, "engine.device": "cpu",
                                             "batching.mode": "bin", "engine.process": "off"})
    run = model_run(s, stop_lengths_file="lengths.json")
    assert (run.path, run.max_new_tokens, run.device, run.batching, run.process) == ("m", 7, "cpu", "bin", "off")
    assert run.local_files_only and run.stop_lengths_file == "lengths.json" and run.prefill_step_tokens == 131_072


def test_hub_downloads_are_off_unless_hf_hub_offline_is_0(tmp_path):
    assert hub_offline({}) and hub_offline({"HF_HUB_OFFLINE": "1"})
    assert not hub_offline({"HF_HUB_OFFLINE": "0"}) and not hub_offline({"HF_HUB_OFFLINE": "false"})
    assert cache_root({"RIBBON_CACHE_DIR": str(tmp_path)}) == tmp_path


def test_delivery_stuck_bounds_each_transactional_call_and_the_hold_warning():
    s = load_settings(environ={"RIBBON_KAFKA__DELIVERY_STUCK_S": "60"})
    assert delivery_config(s).txn_call_timeout_s == 5.0 and delivery_config(s).delivery_stuck_s == 60.0
    marks = Watermarks(high_tokens=2, low_tokens=1, high_messages=2, low_messages=1)
    assert ingest_config(s, marks).hold_warning_s == 60.0


def test_open_windows_hold_a_commit_for_max_length_s_at_most():
    s = load_settings(environ={"RIBBON_WINDOWING__MAX_LENGTH_S": "42"})
    assert rules_of(s.windowing).max_open_s == 42.0
