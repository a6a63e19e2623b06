"""The worker's parts for a benchmark: settings, a warm engine and packer; random weights of a public architecture."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from worker.config.settings import load_settings
from worker.engine.tiny import make_tiny_checkpoint
from worker.pipeline.app import build_parts


def random_checkpoint(arch_config: str, out: Path) -> str:
    """Random weights of a public architecture (config JSON) with the tiny offline tokenizer."""
    tok_dir = make_tiny_checkpoint(out / "tok")
    cfg = AutoConfig.from_pretrained(arch_config)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(out / "model")
    for f in tok_dir.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, out / "model" / f.name)
    return str(out / "model")


def _given(a: argparse.Namespace, **names: str) -> dict:
    """Overrides for the options given on the command line (the settings' defaults otherwise)."""
    return {key: getattr(a, attr) for attr, key in names.items() if getattr(a, attr, None) is not None}


def load_parts(a: argparse.Namespace, overrides: dict | None = None):
    """Settings, a warm engine and packer for the benchmark's model; and a clean-up for its files.
    `overrides`: further settings (dotted keys), e.g. the windowing group."""
    tmp = Path(tempfile.mkdtemp(prefix="ribbon-bench-"))
    model = random_checkpoint(a.arch_config, tmp) if a.arch_config else a.model
    settings = load_settings(overrides={"model.path": model, "model.max_new_tokens": a.max_new_tokens,
                                        "model.device": a.device, "packer.token_budget": a.token_budget,
                                        "server.port": 0, "log_level": "WARNING", "model.process": getattr(a, "process", "auto"),
                                        "digest.compaction": getattr(a, "compaction", "on") == "on",
                                        "pipeline.preprocess_processes": getattr(a, "preprocess_processes", None),
                                        "model.stop_lengths_file": getattr(a, "stop_lengths", None),
                                        **_given(a, prefill_step_tokens="model.prefill_step_tokens",
                                                 refill_fraction="model.refill_fraction", batching="model.batching"),
                                        **(overrides or {})})
    parts = build_parts(settings)

    def cleanup() -> None:
        if hasattr(parts.engine, "close"):  # an engine process
            parts.engine.close()
        shutil.rmtree(tmp, ignore_errors=True)

    return settings, parts, cleanup
