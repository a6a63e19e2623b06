"""Prompts inside the model's context: a prompt and its summary fit the model's positions, whatever the
bin's budget, and a longer document is chunked under that (worker/pipeline/planner.py)."""

from __future__ import annotations

import pytest
import torch

from worker.config.settings import load_settings, model_run
from worker.pipeline.planner import engine_planner, model_limits

POSITIONS, MAX_NEW = 512, 32


@pytest.fixture(scope="module")
def short_context(tmp_path_factory: pytest.TempPathFactory):
    """A tiny checkpoint of 512 positions, loaded through the real loader, and the worker's settings for it."""
    from worker.engine import load_engine
    from worker.engine.tiny import make_tiny_checkpoint

    path = make_tiny_checkpoint(tmp_path_factory.mktemp("model") / "tiny-512", arch="qwen2", seed=0,
                                max_position_embeddings=POSITIONS)
    s = load_settings(environ={}, overrides={"model.path": str(path), "engine.device": "cpu",
                                             "generation.max_new_tokens": MAX_NEW, "engine.attention": "reference"})
    return load_engine(model_run(s), device="cpu"), s


def _long_document(lines: int) -> str:
    return "\n".join(f"2026-03-01T21:{i // 60 % 60:02d}:{i % 60:02d}Z amf-{i % 7} INFO session {i * 7919 % 100_003} "
                     f"released cause={i % 13} peer=10.{i % 250}.{i * 3 % 250}.{i % 17}" for i in range(lines))


def test_model_limits_take_the_positions_less_a_summary():
    assert model_limits(100_000, None, 8_192, 128) == (8_064, 8_064)
    assert model_limits(100_000, 20_000, 8_192, 128) == (8_064, 8_064)  # a setting past the model is held to it
    assert model_limits(2_000, 1_000, 8_192, 128) == (2_000, 1_000)
    assert model_limits(2_000, None, None, 128) == (2_000, None)  # no positions known: the budget alone


def test_a_long_document_is_chunked_so_no_sequence_passes_the_models_positions(short_context):
    """A bin budget far above the model's 512 positions (as on a GPU): before, the whole document went as one
    sequence of thousands of tokens."""
    eng, s = short_context
    assert eng.max_positions == POSITIONS
    planner = engine_planner(eng, s, budget_prompt=65_536 - MAX_NEW, reserve=MAX_NEW)
    text = _long_document(120)
    plan = planner.plan(text)
    assert plan.document_tokens > 4 * POSITIONS
    assert len(plan.prompts) > 4 and max(map(len, plan.prompts)) <= POSITIONS - MAX_NEW
    head, tail = eng.prompt_frame()
    assert all(list(p[:len(head)]) == head and list(p[len(p) - len(tail):]) == tail for p in plan.prompts)
    # the chunks through the real generation path: every sequence and its summary within the positions
    chunk = plan.prompts[:3]
    cu = [0]
    for p in chunk:
        cu.append(cu[-1] + len(p))
    staged = eng.stage(torch.tensor([t for p in chunk for t in p], dtype=torch.int32), cu, max(map(len, chunk)))
    outs = eng.generate(staged)
    assert all(len(p) + len(g.token_ids) <= POSITIONS for p, g in zip(chunk, outs))
