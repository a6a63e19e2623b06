"""`ribbon validate`: what `ribbon run` would meet, checked without running it.

Each check returns (ok, name, detail); a failed check never stops the others
(except that topics are not looked up on a cluster that did not answer).
Settings are checked before any of this, by loading them (exit 2 if bad).
"""

from __future__ import annotations

from typing import Any

from worker.config.errors import StartupError

Check = tuple[bool, str, str]


def run_checks(settings: Any, timeout_s: float) -> list[Check]:
    k = settings.kafka
    out: list[Check] = [(True, "settings", f"loaded; group {k.group_id!r}, delivery {k.delivery}")]
    out.append(_identity(settings))
    model_ok, model = _model(settings)
    out.append(model_ok)
    out.append(_tokenizer(model) if model_ok[0] else (False, "tokenizer", "skipped: no model"))
    out.append(_attention(settings))
    out.extend(_cluster(settings, timeout_s))
    return out


def _identity(settings: Any) -> Check:
    from worker.config.settings import SettingsError
    from worker.kafka.config import kafka_client_config

    try:
        _, producer = kafka_client_config(settings.kafka, bootstrap=settings.kafka.bootstrap_servers or "embedded:0")
    except SettingsError as exc:
        return False, "identity", str(exc)
    tid = producer.get("transactional.id")
    return True, "identity", f"transactional.id {tid!r}" if tid else "at_least_once: no transactional.id"


def _model(settings: Any) -> tuple[Check, str]:
    from worker.cli.preflight import check_model_path
    from worker.pipeline.app import resolve_model_path

    m = settings.model
    try:
        path = check_model_path(m.path, m.local_files_only, m)
    except StartupError as exc:
        return (False, "model", str(exc)), ""
    path = resolve_model_path(path)
    return (True, "model", f"{m.path} ({m.mode}) at {path}"), path


def _tokenizer(path: str) -> Check:
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        return False, "tokenizer", " ".join(str(exc).split())[:300]
    chat = "with" if getattr(tok, "chat_template", None) else "without"
    return True, "tokenizer", f"{type(tok).__name__}, vocabulary {len(tok)}, {chat} a chat template"


def _attention(settings: Any) -> Check:
    try:
        from worker.engine.attention import choose_backend, varlen_available
        from worker.engine.loader import resolve_device

        device = resolve_device(settings.model.device)
        backend = choose_backend(settings.model.attention, device)
    except (ValueError, RuntimeError) as exc:  # the engine's EngineSettingError is a ValueError
        return False, "attention", " ".join(str(exc).split())
    import torch

    varlen = "has" if varlen_available() else "lacks"
    return True, "attention", f"{backend} on {device} (torch {torch.__version__} {varlen} torch.nn.attention.varlen)"


def _cluster(settings: Any, timeout_s: float) -> list[Check]:
    from worker.cli.preflight import probe_cluster
    from worker.kafka.config import kafka_client_config

    k = settings.kafka
    if not k.bootstrap_servers:
        return [(True, "broker", "no bootstrap servers: `ribbon run` starts the embedded broker")]
    try:
        info = probe_cluster(kafka_client_config(k)[1], timeout_s)
    except StartupError as exc:
        return [(False, "broker", str(exc))]
    out: list[Check] = [(True, "broker", f"{k.bootstrap_servers}: {info.brokers} broker(s)")]
    wanted = [("input topic", t) for t in k.input_topics] + [("output topic", k.output_topic),
                                                             ("dead-letter topic", k.dlq_topic)]
    for role, name in wanted:
        if name in info.topics:
            out.append((True, role, f"{name}: {info.topics[name]} partition(s)"))
        else:
            out.append((False, role, f"{name}: does not exist"))
    return out
