"""The generation engine: packed prefill and batched decode over bins of documents.

API (the worker's GPU thread is the only caller; nothing here is thread-safe):

    from worker.engine import load_engine, Engine, Generated, autotune_budget
    eng = load_engine(model_settings, device=None)   # local path or hub id; bf16 on CUDA, fp32 on CPU
    eng.backend            # "flash_attn" | "varlen" | "reference" (logged at load)
    eng.compiled           # decoder layers through torch.compile (engine.compile; CUDA only)
    eng.merged             # q/k/v and gate/up as one GEMM each (EngineOptions.merge; auto: CUDA only)
    eng.quantization       # "none" | "fp8": prefill GEMMs in FP8 (fp8.py; model.quantization)
    eng.prefill_kernel     # prefill attention: "triton" | "fa2" | ...; "triton_fp8" / "fp8_emulated" with model.fp8_attention
    eng.warm_up(budget, max_docs)  # at start, after autotune: KV pool, compiled layers, every decode graph
    eng.name, eng.tokenizer, eng.device
    eng.prompt_ids(document) -> list[int]            # instruction + document (chat template if any)
    eng.prompt_frame() -> (head, tail)               # the ids around every document: the one owner of framing
    eng.max_positions                                # the model's positions: a prompt + its summary fit them
    staged = eng.stage(tokens, cu_seqlens, max_seqlen)
        # H2D copy on a copy stream from a pinned slot view; release the slot after
        # staged.wait_copied().
    outs = eng.generate(staged, seeds=None) -> list[Generated]   # ribbon order
        # Generated(token_ids, text, finish_reason "eos"|"stop"|"length"|"loop", prompt_tokens)
        # "loop": the output looped (loops.loop_start; EngineOptions.cut_loops), its text cut where it began
        # CUDA OOM: the bin is split and retried (eng.stats["oom_splits"]); nothing is dropped.
    eng.prefill_last_logits(staged) -> Tensor [n, vocab]
    b = eng.batcher(seats, kv_rows)   # continuous batching (continuous.py; policy in scheduler.py)
    b.add(staged, seeds, tags)        # a bin's documents queue (tag None: skipped)
    b.wants_work() -> bool            # free seats and KV rows (all, while the running cohort ends) exceed what waits
    r = b.step()                      # admit + packed prefill (budgeted) + k decode steps + one look
    r.done -> [(tag, Generated, gpu_s)]   # documents that finished in this step, handed back at once
    b.busy, b.running, b.abort() -> [(tag, seed, limit)]   # abort: after a failure, run them alone
    autotune_budget(eng, max_new_tokens, ...) -> int  # Phase 0, cached on disk

Settings this machine cannot honour raise worker.engine.errors.EngineSettingError (a ValueError
naming the setting). Importing this package does not import torch; the names load on first use.
"""

from __future__ import annotations

import importlib

__all__ = ["load_engine", "Engine", "Generated", "Staged", "autotune_budget", "make_tiny_checkpoint"]

_WHERE = {
    "load_engine": "worker.engine.loader",
    "Engine": "worker.engine.engine",
    "Generated": "worker.engine.outputs",
    "Staged": "worker.engine.engine",
    "autotune_budget": "worker.engine.autotune",
    "make_tiny_checkpoint": "worker.engine.tiny",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'worker.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
