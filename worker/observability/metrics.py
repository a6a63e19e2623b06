"""Prometheus metrics (base units, _total/_seconds) and the /metrics, /healthz, /readyz server."""

from __future__ import annotations

import platform
from bisect import bisect_left, bisect_right
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from importlib import metadata

from prometheus_client import (
    CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector, ProcessCollector, generate_latest,
)

from worker import __version__
from worker.config.errors import StartupError
from worker.observability.health import Health
from worker.observability.http import HttpServer


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def observe_many(histogram, values: list[float]) -> None:
    """`histogram.observe(v)` for each of `values`, each bucket counted up once (a poll's records' ages).
    prometheus_client's Histogram keeps a sum and one counter per bucket, a value counted in the first
    bucket whose bound it does not exceed; a histogram without those (another client) takes them one by one."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    if bounds is None or buckets is None or len(bounds) != len(buckets) or not values:
        for v in values:
            histogram.observe(v)
        return
    histogram._raise_if_not_observable()
    histogram._sum.inc(sum(values))
    for i, n in Tally(map(bisect_left, repeat(bounds), values)).items():
        buckets[i].inc(n)


def observe_ages(histogram, wall_s: float, stamps: list[tuple[int, int]]) -> None:
    """`histogram.observe(max(0, wall_s - ts / 1e3))` for each Kafka timestamp (kind, ms) that has one (kind
    not 0): a poll's records' ages. With prometheus_client's buckets, the timestamps are sorted (a poll's are
    in order, as a rule) and each bucket's count is one bisection by age; else `observe_many`."""
    ms = [ts for kind, ts in stamps if kind != 0]
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    if bounds is None or buckets is None or len(bounds) != len(buckets) or not ms:
        observe_many(histogram, [max(0.0, wall_s - ts / 1e3) for ts in ms])
        return
    ms.sort(reverse=True)  # ages ascending

    def age(ts: int) -> float:
        return max(0.0, wall_s - ts / 1e3)

    histogram._raise_if_not_observable()
    fresh = bisect_right(ms, 0.0, key=age)  # age 0 (a timestamp at or past the wall clock)
    histogram._sum.inc((len(ms) - fresh) * wall_s - sum(ms[fresh:]) / 1e3)
    below = 0
    for bound, bucket in zip(bounds, buckets):
        upto = bisect_right(ms, bound, below, key=age)  # ages <= bound: the first bucket whose bound it does not exceed
        if upto > below:
            bucket.inc(upto - below)
        below = upto


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        PlatformCollector(registry=r)  # python_info
        Info("ribbon_build", "the running build: ribbon, Python, torch and librdkafka client versions",
             registry=r).info({"version": __version__, "python": platform.python_version(),
                               "torch": _dist_version("torch"), "confluent_kafka": _dist_version("confluent-kafka"),
                               "transformers": _dist_version("transformers")})
        self.consumed = Counter("ribbon_consumed_messages_total", "input messages polled", registry=r)
        self.produced = Counter("ribbon_produced_summaries_total", "summaries committed to the output topic",
                                registry=r)
        self.dead_lettered = Counter("ribbon_dead_lettered_messages_total", "messages sent to the dead-letter topic",
                                     ["reason"], registry=r)
        self.redactions = Counter("ribbon_redactions_total", "secrets replaced with <redacted:kind> in published "
                                  "outputs (worker/redaction/), by kind", ["kind"], registry=r)
        self.input_tokens = Counter("ribbon_input_tokens_total", "prompt tokens run through the model", registry=r)
        self.output_tokens = Counter("ribbon_output_tokens_total", "tokens generated", registry=r)
        self.bins = Counter("ribbon_bins_total", "bins run on the model", registry=r)
        self.model_documents = Counter("ribbon_model_documents_total", "sequences the model finished (documents, "
                                       "or chunks of long ones)", registry=r)
        self.bin_fill = Histogram("ribbon_bin_fill_ratio", "bin weight over the token budget", registry=r,
                                  buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0))
        self.latency = Histogram("ribbon_end_to_end_latency_seconds", "poll to summary ready", registry=r,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.gpu_seconds = Counter("ribbon_gpu_busy_seconds_total", "time the model ran", registry=r)
        self.bin_seconds = Histogram("ribbon_bin_seconds", "one bin on the model, staging to its last output",
                                     registry=r, buckets=_SECONDS)
        self.record_age = Histogram("ribbon_record_age_seconds", "an input record's age when polled (its "
                                    "timestamp to now: the wait in Kafka, as far as the clocks agree)",
                                    registry=r, buckets=_SECONDS)
        self.delivery_step = Histogram("ribbon_delivery_step_seconds", "one delivery step: a transaction "
                                     "(exactly_once) or a produce-and-flush, begin to committed", registry=r,
                                     buckets=_SECONDS)
        self.gc_pause = Histogram("ribbon_gc_pause_seconds", "Python garbage-collector pauses in the worker's "
                                  "process (every thread waits through one)", ["generation"], registry=r,
                                  buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
        self.digest_seconds = Counter("ribbon_digest_seconds_total", "CPU time of the documents' digest passes "
                                      "(digest, highlights, compaction), wherever they ran", registry=r)
        self.digest_wall_seconds = Counter("ribbon_digest_wall_seconds_total", "time the ingest thread spent "
                                           "on (or waiting for) the digest passes", registry=r)
        self.document_tokens = Counter("ribbon_document_tokens_total", "tokens of the raw documents, before "
                                       "compaction (generative mode)", registry=r)
        self.compacted = Counter("ribbon_compacted_documents_total", "documents the model saw compacted", registry=r)
        self.pending_tokens = Gauge("ribbon_pending_tokens", "tokens waiting in the packer", registry=r)
        self.reorder = Gauge("ribbon_reorder_buffer_messages", "finished messages waiting for an earlier offset",
                             registry=r)
        self.inflight = Gauge("ribbon_inflight_messages", "messages polled and not yet committed", registry=r)
        self.spilled = Gauge("ribbon_spilled_dead_letter_bytes", "dead-letter values waiting on disk for their commit",
                             registry=r)
        self.held = Gauge("ribbon_held_partition_seconds", "age of the oldest unfinished input holding back "
                          "its partition's commits", ["topic", "partition"], registry=r)
        self.slow_documents = Counter("ribbon_slow_documents_total", "inputs that held their partition longer "
                                      "than kafka.delivery_stuck_s", registry=r)
        self.open_windows = Gauge("ribbon_open_windows", "windows of line records open (windowing.enabled)",
                                  registry=r)
        self.window_bytes = Gauge("ribbon_window_held_bytes", "text held in open windows", registry=r)
        self.window_records = Gauge("ribbon_window_held_records", "records read into open windows: consumed, not "
                                    "committed, not waiting (KEDA subtracts them from the lag)", registry=r)
        self.late_records = Counter("ribbon_window_late_records_total", "records older than their partition's "
                                    "watermark less windowing.grace_s (record/event time): kept, counted",
                                    registry=r)
        self.windows_closed = Counter("ribbon_windows_closed_total", "windows closed, by rule", ["reason"], registry=r)
        self.paused = Gauge("ribbon_paused_partitions", "partitions paused by backpressure", registry=r)
        self.lag = Gauge("ribbon_consumer_lag_messages", "high watermark minus the committed offset (what an "
                         "autoscaler sees): input not yet summarized and committed", ["topic", "partition"],
                         registry=r)
        self.unfinished = Gauge("ribbon_fetched_unfinished_messages", "messages fetched and not yet committed "
                                "(in the packer, on the model, in finishing or the reorder buffer)",
                                ["topic", "partition"], registry=r)
        self.committed = Counter("ribbon_committed_offsets_total", "input offsets committed (summaries and dead "
                                 "letters alike)", registry=r)
        self.txn_commits = Counter("ribbon_transaction_commits_total", "transactions committed", registry=r)
        self.txn_aborts = Counter("ribbon_transaction_aborts_total", "transactions aborted", registry=r)
        self.ungrounded_summaries = Counter("ribbon_ungrounded_summaries_total", "model summaries holding an "
                                            "identifier found in neither the document nor its digest", registry=r)
        self.ungrounded_identifiers = Counter("ribbon_ungrounded_identifiers_total", "such identifiers (each once "
                                              "per summary)", registry=r)
        self.ungrounded_sentences = Counter("ribbon_ungrounded_sentences_dropped_total", "model summary sentences "
                                            "dropped for holding one", registry=r)
        self.ungrounded_fallbacks = Counter("ribbon_ungrounded_fallbacks_total", "model summaries replaced by the "
                                            "digest rendering: no sentence was left", registry=r)
        self.published = Counter("ribbon_summaries_published_total", "summaries published, by source (model | "
                                 "digest) and the publish gate's reason (passed, digest_mode, or its first failed "
                                 "check: content, loop, copy, grounded, fact)", ["source", "reason"], registry=r)
        self.oom_splits = Counter("ribbon_oom_splits_total", "bins split after a CUDA out-of-memory", registry=r)
        self.model_errors = Counter("ribbon_model_errors_total", "model failures on a bin (retried alone)",
                                    registry=r)
        self.internal_errors = Counter("ribbon_internal_errors_total", "inputs whose processing raised in ingest "
                                       "(dead-lettered as internal_error; the stage went on)", ["stage", "exception"],
                                       registry=r)
        self.skipped = Counter("ribbon_skipped_records_total", "input offsets committed with nothing produced: "
                               "even the smallest dead letter was refused (logged at ERROR)", ["reason"], registry=r)
        self.consume_errors = Counter("ribbon_consume_errors_total", "consumer errors tied to one input offset "
                                      "(retried, then dead-lettered)", ["error"], registry=r)
        self.stalled_seconds = Gauge("ribbon_partition_stalled_seconds", "how long an assigned partition with lag "
                                     "has gone without a commit (0: progressing)", ["topic", "partition"],
                                     registry=r)
        self._ready = Gauge("ribbon_ready", "1 while /readyz says ready (model loaded, partitions assigned)",
                            registry=r)
        self._starting = Gauge("ribbon_starting", "1 while the worker starts (model load, autotune, warm-up, "
                               "producer): /metrics answers, /healthz says starting", registry=r)
        self._flags = {"ready": False, "starting": False}

    # `ready` and `starting` are plain booleans to the app, which alone sets them (`ready` from its combined
    # health), and gauges to Prometheus (the alert rules in deploy/prometheus-rules.yml tell a worker that
    # starts from one that is down).
    @property
    def ready(self) -> bool:
        return self._flags["ready"]

    @ready.setter
    def ready(self, value: bool) -> None:
        self._flags["ready"] = bool(value)
        self._ready.set(1 if value else 0)

    @property
    def starting(self) -> bool:
        return self._flags["starting"]

    @starting.setter
    def starting(self, value: bool) -> None:
        self._flags["starting"] = bool(value)
        self._starting.set(1 if value else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True)
class Probes:
    """What /healthz and /readyz ask the worker: its health, combined over every source it holds
    (Worker.health; worker/observability/health.py). None: ready as `Metrics.ready` says, always live."""

    health: Callable[[], Health] | None = None


class HealthServer:
    """Serves /metrics, /healthz (every health source live) and /readyz (every source ready: partitions
    assigned, no stage stalled, not draining). /healthz says "starting" while the model loads.

    The server itself is worker.observability.http (prometheus_client's WSGI app, idle timeouts, no tracebacks);
    a port it cannot listen on is a start-up error naming server.port/server.host.
    """

    def __init__(self, metrics: Metrics, host: str, port: int, probes: Probes | None = None,
                 idle_timeout_s: float = 5.0) -> None:
        self.metrics = metrics
        self.probe = (probes or Probes()).health or (lambda: Health(ready=metrics.ready))
        probes_by_path = {"/healthz": self.health, "/readyz": self.readiness}
        try:
            self.http = HttpServer(metrics.registry, host, port, probes_by_path, idle_timeout_s=idle_timeout_s)
        except OSError as exc:
            raise StartupError("server.port", f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                               "a free port, or 0 to disable the server") from None
        self.port = self.http.port

    def readiness(self) -> tuple[bool, str]:
        h = self.probe()
        return (True, "ready") if h.ready else (False, f"not ready: {h.why}" if h.why else "not ready")

    def health(self) -> tuple[bool, str]:
        if self.metrics.starting:
            return False, "starting (model load, autotune, warm-up)"
        h = self.probe()
        return (True, "ok") if h.live else (False, h.why or "not live")

    def start(self) -> HealthServer:
        self.http.start()
        return self

    def stop(self) -> None:
        self.http.stop()
