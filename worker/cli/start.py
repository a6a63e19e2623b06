"""Starting the worker for `ribbon run` and `ribbon replay rerun`: its identity, the broker check, the Worker."""

from __future__ import annotations

import logging
from typing import Any

from worker.cli.preflight import check_client_config, probe_cluster
from worker.config.errors import StartupError
from worker.kafka.config import kafka_client_config
from worker.pipeline.app import Worker
from worker.remote.process import EngineStopped

log = logging.getLogger(__name__)


def warn_if_unreachable(settings: Any, timeout_s: float = 3.0) -> None:
    """`run` with a broker that does not answer yet: say so once (the worker keeps retrying)."""
    try:
        probe_cluster(kafka_client_config(settings.kafka)[1], timeout_s)
    except StartupError as exc:
        log.warning("%s; the worker keeps retrying", exc)


def build_worker(settings: Any, bootstrap: str, stop: Any = None) -> Any:
    """The Worker, or one line naming model.path when the model's files cannot be loaded; None when
    `stop` was set while its engine process started."""
    try:
        return Worker(settings, bootstrap, stop=stop)
    except EngineStopped:
        return None
    except (OSError, ValueError) as exc:  # missing weights, unknown architecture, unreadable JSON, ...
        first = " ".join(str(exc).split())[:300]
        raise StartupError("model.path", f"cannot load {settings.model.path!r}: {type(exc).__name__}: {first}",
                           "a Hugging Face causal LM folder or cached hub id, or 'tiny-random'") from None


def log_identity(settings: Any) -> None:
    """One line saying who this worker is to the broker (its transactional.id and group); the client
    properties checked by librdkafka first (a bad one is one line naming kafka.*_extra)."""
    consumer, producer = kafka_client_config(settings.kafka)
    check_client_config(consumer, producer)
    log.info("worker identity: group %s, transactional.id %s", settings.kafka.group_id,
             producer.get("transactional.id", "none (at_least_once)"))
