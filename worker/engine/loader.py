"""The one loader used by tests and production: a local path or hub id -> Engine."""

from __future__ import annotations

import json
import logging
import os

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from worker.engine.attention import choose_backend, flash_attn_available, triton_available, varlen_available
from worker.engine.engine import Engine, EngineOptions
from worker.engine.errors import EngineSettingError
from worker.engine.guards import GuardConfig

log = logging.getLogger(__name__)

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_device(requested: str | None) -> torch.device:
    if requested in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(requested)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise EngineSettingError("engine.device", f"{requested!r} but CUDA is not available", "auto or cpu")
    return dev


def resolve_dtype(requested: str, device: torch.device) -> torch.dtype:
    """auto: bf16 on CUDA (fp16 where bf16 is unsupported), fp32 on CPU."""
    if requested != "auto":
        return _DTYPES[requested]
    if device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def usable_cores() -> int:
    """Cores this process may run on (its affinity where the OS tells it, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def apply_cpu_threads(cores: int | None = None) -> int:
    """torch's intra-op threads for a model on the CPU; returns the thread count now in force.

    1 thread on 2 cores or fewer (shared cores: a second thread mostly waits and is slower, measured
    in docs/engine.md), else torch's default (OMP_NUM_THREADS where set) is left alone.
    """
    cores = usable_cores() if cores is None else cores
    if cores <= 2:
        torch.set_num_threads(1)
    threads = torch.get_num_threads()
    log.info("cpu threads", extra={"threads": threads, "cores": cores})
    return threads


def refuse_slow_cuda(backend: str, device: torch.device, requested: str) -> None:
    """On CUDA, `auto` landing on the exact reference path means a torch without the fused path
    (e.g. an image whose torch predates varlen_attn): many times slower, so refuse to start.
    An explicit attention=reference is honoured."""
    if device.type != "cuda" or backend != "reference" or requested != "auto":
        return
    raise EngineSettingError(
        "engine.attention",
        f"on CUDA attention=auto found only the exact reference path (torch {torch.__version__}: flash_attn "
        f"{'yes' if flash_attn_available() else 'no'}, torch varlen_attn {'yes' if varlen_available() else 'no'}, "
        f"triton {'yes' if triton_available() else 'no'}); it is many times slower, so the worker does not start",
        "reference to run on the reference path anyway, or install a torch with varlen_attn (>= 2.11) and triton")


def options_from(settings) -> EngineOptions:
    """ModelRun (or any object with the same fields) -> EngineOptions; what no setting names keeps
    EngineOptions' default (CUDA graphs on CUDA, the chat template where the tokenizer has one, ...)."""
    return EngineOptions(
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        stop_strings=tuple(settings.stop_strings),
        instruction=settings.instruction,
        compile=getattr(settings, "compile", "auto"),
        batching=getattr(settings, "batching", "bin"),
        quantization=getattr(settings, "quantization", "none"),
        fp8_attention=getattr(settings, "fp8_attention", False),
        prefill_step_tokens=getattr(settings, "prefill_step_tokens", 131_072),
        refill_fraction=getattr(settings, "refill_fraction", 0.25),
        stop_lengths=read_stop_lengths(getattr(settings, "stop_lengths_file", None)),
        cut_loops=True,  # the worker's engine: a looping summary ends at its loop (benchmark engines: off)
        guards=GuardConfig(repetition_penalty=getattr(settings, "repetition_penalty", 1.0),
                           no_repeat_ngram=getattr(settings, "no_repeat_ngram", 0),
                           min_new_tokens=min(getattr(settings, "min_new_tokens", 0), settings.max_new_tokens)),
    )


def read_stop_lengths(path: str | None) -> tuple[int, ...]:
    """ModelRun.stop_lengths_file (benchmarks): a JSON list of positive ints, or an object with one under "lengths"."""
    if not path:
        return ()
    try:
        data = json.loads(open(path, encoding="utf-8").read())
        lengths = data["lengths"] if isinstance(data, dict) else data
        out = tuple(int(x) for x in lengths)
        if not out or min(out) < 1:
            raise ValueError("an empty list or a length < 1")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EngineSettingError("--stop-lengths", f"{path!r} is not a list of output lengths ({exc})",
                                 "a JSON list of ints >= 1, or {\"lengths\": [...]}") from None
    return out


def load_engine(settings, device: str | None = None, **option_overrides) -> Engine:
    """Load the model and tokenizer named by settings.path and wrap them in an Engine.

    `device` overrides settings.device. Honors local_files_only (no download unless allowed: hub_offline()).
    `option_overrides` set EngineOptions fields no setting names (tests, benchmarks: cuda_graphs=False, ...).
    """
    dev = resolve_device(device if device is not None else settings.device)
    dtype = resolve_dtype(settings.dtype, dev)
    backend = choose_backend(settings.attention, dev)
    refuse_slow_cuda(backend, dev, settings.attention)
    if dev.type == "cpu":
        apply_cpu_threads()
    local = bool(getattr(settings, "local_files_only", True))
    tokenizer = AutoTokenizer.from_pretrained(settings.path, local_files_only=local)
    model = AutoModelForCausalLM.from_pretrained(settings.path, dtype=dtype, local_files_only=local, attn_implementation="sdpa")
    model.to(dev)
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token
    opts = options_from(settings)
    for k, v in option_overrides.items():
        setattr(opts, k, v)
    log.info("attention backend chosen", extra={"backend": backend, "device": str(dev), "dtype": str(dtype),
                                                "requested": settings.attention, "torch": torch.__version__})
    return Engine(model, tokenizer, backend, opts, name=str(settings.path))


def random_model(config_path: str, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """A model of this architecture (config JSON) with random weights, built on `device` (benchmarks)."""
    with open(config_path) as f:
        cfg = AutoConfig.for_model(**json.load(f))
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def engine_for_model(model, tokenizer, attention: str = "auto", name: str = "model", **options) -> Engine:
    """Wrap an already-built model (random weights in benchmarks) the same way load_engine does."""
    dev = next(model.parameters()).device
    backend = choose_backend(attention, dev)
    log.info("attention backend chosen", extra={"backend": backend, "device": str(dev)})
    return Engine(model, tokenizer, backend, EngineOptions(**options), name=name)
