"""`ribbon validate`: what `ribbon run` would meet, checked without running it.

Each check returns (ok, name, detail); a failed check never stops the others
(except that topics are not looked up on a cluster that did not answer).
Settings are checked before any of this, by loading them (exit 2 if bad).

The checks are `run`'s own, called the same way: the client properties go
through `preflight.check_client_config` (librdkafka builds both clients, so an
unknown or bad `kafka.*_extra` property fails here as it stops `run`), the model
through `preflight.check_model_path` only where `run` loads one (not in digest
mode). Under exactly_once a producer with a probe transactional.id (the
worker's id + `.validate-<random>`, so a live worker is never fenced, and a
prefixed ACL that covers the worker covers the probe) calls
`init_transactions`: the first call that fails on a broker without
transactions, with too few brokers for the transaction log, or without the
ACL.
"""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import KafkaException, Producer

from worker.cli.preflight import PROBE_LOGGER, check_client_config, check_model_path, probe_cluster, refuse_random_model
from worker.config.errors import StartupError
from worker.config.model import hub_offline
from worker.config.settings import SettingsError
from worker.kafka.config import kafka_client_config

Check = tuple[bool, str, str]


def run_checks(settings: Any, timeout_s: float) -> list[Check]:
    k = settings.kafka
    out: list[Check] = [(True, "settings", f"loaded; group {k.group_id!r}, delivery {k.delivery}")]
    out.append(_identity(settings))
    out.append(_clients(settings))
    if settings.model.mode == "digest":
        out.append((True, "model", "digest mode: no model, tokenizer or attention backend is loaded"))
    else:
        model_ok, model = _model(settings)
        out.append(model_ok)
        out.append(_tokenizer(model) if model_ok[0] else (False, "tokenizer", "skipped: no model"))
        out.append(_attention(settings))
    out.extend(_cluster(settings, timeout_s))
    return out


def _clients(settings: Any) -> Check:
    """The consumer and producer properties, built by librdkafka as `run` builds them at start."""
    try:
        consumer, producer = kafka_client_config(settings.kafka,
                                                 bootstrap=settings.kafka.bootstrap_servers or "embedded:0")
        check_client_config(consumer, producer)
    except (SettingsError, StartupError) as exc:
        return False, "kafka clients", str(exc)
    extra = len(settings.kafka.consumer_extra) + len(settings.kafka.producer_extra)
    return True, "kafka clients", f"librdkafka accepts both clients' properties ({extra} from kafka.*_extra)"


def _identity(settings: Any) -> Check:
    try:
        _, producer = kafka_client_config(settings.kafka, bootstrap=settings.kafka.bootstrap_servers or "embedded:0")
    except SettingsError as exc:
        return False, "identity", str(exc)
    tid = producer.get("transactional.id")
    return True, "identity", f"transactional.id {tid!r}" if tid else "at_least_once: no transactional.id"


def _model(settings: Any) -> tuple[Check, str]:
    from worker.pipeline.app import resolve_model_path  # noqa: PLC0415 the pipeline off a digest-mode validate

    m = settings.model
    try:
        refuse_random_model(m.path)  # as run does
        path = check_model_path(m.path, hub_offline(), fetch_known=True)
    except StartupError as exc:
        return (False, "model", str(exc)), ""
    path = resolve_model_path(path)
    return (True, "model", f"{m.path} ({m.mode}) at {path}"), path


def _tokenizer(path: str) -> Check:
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415 transformers off a digest-mode validate

        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        return False, "tokenizer", " ".join(str(exc).split())[:300]
    chat = "with" if getattr(tok, "chat_template", None) else "without"
    return True, "tokenizer", f"{type(tok).__name__}, vocabulary {len(tok)}, {chat} a chat template"


def _attention(settings: Any) -> Check:
    try:
        from worker.engine.attention import choose_backend, varlen_available  # noqa: PLC0415 torch off digest mode
        from worker.engine.loader import resolve_device  # noqa: PLC0415 torch off a digest-mode validate

        device = resolve_device(settings.engine.device)
        backend = choose_backend(settings.engine.attention, device)
    except (ValueError, RuntimeError) as exc:  # the engine's EngineSettingError is a ValueError
        return False, "attention", " ".join(str(exc).split())
    import torch  # noqa: PLC0415 torch (~1.5 s) off a digest-mode validate

    varlen = "has" if varlen_available() else "lacks"
    return True, "attention", f"{backend} on {device} (torch {torch.__version__} {varlen} torch.nn.attention.varlen)"


def _cluster(settings: Any, timeout_s: float) -> list[Check]:
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
    if k.delivery == "exactly_once":
        out.append(_transactions(settings, timeout_s))
    return out


def _transactions(settings: Any, timeout_s: float) -> Check:
    """init_transactions with a probe transactional.id (never the worker's own: that would fence it)."""
    try:
        producer_conf = kafka_client_config(settings.kafka)[1]
    except SettingsError as exc:
        return False, "transactions", str(exc)
    probe_id = f"{producer_conf['transactional.id']}.validate-{uuid.uuid4().hex[:8]}"
    conf = {**producer_conf, "transactional.id": probe_id, "logger": PROBE_LOGGER,
            "error_cb": lambda err: PROBE_LOGGER.debug("%s", err)}
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        return False, "transactions", f"librdkafka refused the producer: {exc.args[0].str()}"
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        err = exc.args[0]
        return False, "transactions", (f"init_transactions failed within {timeout_s:g} s: {err.name()}: {err.str()} "
                                       "(exactly_once needs transactions on the broker, a transaction state log "
                                       "it can write, and the TransactionalId ACL)")
    finally:
        producer.flush(1.0)
    return True, "transactions", f"init_transactions answered (probe transactional.id {probe_id!r})"
