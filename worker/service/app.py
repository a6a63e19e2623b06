"""`ribbon run`: wires ingest → packer → GPU → delivery, and stops them in order.

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

from worker.service.delivery import Delivery
from worker.service.docs import DocRegistry
from worker.service.gpu import GpuLoop
from worker.service.ingest import Ingest, Watermarks
from worker.service.metrics import HealthServer, Metrics
from worker.service.planner import Planner
from worker.service.tracker import OffsetTracker

log = logging.getLogger(__name__)

@dataclass
class Parts:
    engine: object
    packer: object
    budget: int
    reserve: int


def resolve_model_path(path: str, cache_dir: Path | None = None) -> str:
    """'tiny-random' is the embedded default: a tiny random model built offline (demo, tests)."""
    if path != "tiny-random":
        return path
    from worker.engine.tiny import make_tiny_checkpoint

    target = (cache_dir or Path(os.environ.get("RIBBON_CACHE_DIR", Path.home() / ".cache" / "ribbon"))) / "tiny-random"
    if not (target / "config.json").exists():
        make_tiny_checkpoint(target)
    return str(target)


def build_parts(settings, engine=None) -> Parts:
    """Load the engine (unless given), settle the token budget, and make a packer for it."""
    if engine is None:
        from transformers.utils import logging as hf_logging

        from worker.engine import load_engine
        from worker.engine.errors import EngineSettingError
        from worker.settings import SettingsError

        hf_logging.disable_progress_bar()
        try:
            engine = load_engine(settings.model.model_copy(update={"path": resolve_model_path(settings.model.path)}))
        except EngineSettingError as exc:
            raise SettingsError(exc.setting, exc.message, exc.allowed) from None
    reserve = settings.packer.reserve_per_seq if settings.packer.reserve_per_seq is not None \
        else settings.model.max_new_tokens
    budget = settings.packer.token_budget
    if budget == "auto":
        from worker.engine import autotune_budget

        budget = autotune_budget(engine, settings.model.max_new_tokens)  # cached on disk; CPU: a fixed default
    log.info("token budget %d (reserve %d per document), attention backend %s", budget, reserve, engine.backend)
    if hasattr(engine, "warm_up"):  # KV pool, compiled layers and decode graphs now, not in the first live bins
        engine.warm_up(int(budget), settings.packer.max_seqs_per_bin)
    return Parts(engine, make_packer(settings, int(budget), reserve, engine.device), int(budget), reserve)


def make_packer(settings, budget: int, reserve: int, device):
    from worker.packer import Packer

    p = settings.packer
    return Packer(budget=budget, reserve_per_seq=reserve, max_seqs=p.max_seqs_per_bin,
                  efficient_tokens=min(p.efficient_tokens, budget), max_wait_s=p.max_wait_ms / 1e3,
                  latency_target_s=p.latency_target_ms / 1e3, alignment=p.alignment, slots=p.slots,
                  device="cuda" if str(device).startswith("cuda") else "cpu")


class Worker:
    def __init__(self, settings, bootstrap: str, parts: Parts | None = None):
        from worker.settings import kafka_client_config

        self.s = settings
        self.metrics = Metrics()
        self.tracker = OffsetTracker()
        self.registry = DocRegistry()
        consumer_conf, producer_conf = kafka_client_config(settings.kafka, bootstrap=bootstrap)
        self.delivery = Delivery(settings=settings, producer_conf=producer_conf, tracker=self.tracker,
                                 metrics=self.metrics)
        self.gpu: GpuLoop | None = None
        if settings.model.mode == "digest":  # no model, no packer, no GPU thread: ingest finishes documents
            self.engine, self.packer, self.budget = None, None, 0
            self.ingest = Ingest(settings=settings, consumer_conf=consumer_conf, tracker=self.tracker,
                                 registry=self.registry, packer=None, planner=None, delivery=self.delivery,
                                 metrics=self.metrics, watermarks=Watermarks(1, 1, 20_000, 10_000))
        else:
            self._generative(settings, parts or build_parts(settings), consumer_conf)
        self.server = None
        if settings.server.port:
            self.server = HealthServer(self.metrics, settings.server.host, settings.server.port,
                                       busy=lambda: self.gpu is not None and self.gpu.busy_since is not None)
        self.draining = threading.Event()
        self._threads: list[threading.Thread] = []

    def _generative(self, settings, parts: Parts, consumer_conf: dict) -> None:
        self.engine, self.packer, self.budget = parts.engine, parts.packer, parts.budget
        reserve = parts.reserve
        tok = self.engine.tokenizer
        # The ingest thread shares the engine's tokenizer: encode and decode take it read-only
        # (no call changes truncation or padding state, the one way fast tokenizers fail across threads).
        try:
            planner = Planner(self.engine.prompt_ids,
                              lambda texts: [len(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]],
                              max_prompt_tokens=self.budget - reserve, max_input_tokens=settings.model.max_input_tokens,
                              truncate=settings.model.truncate, max_new_tokens=reserve,
                              prompt_batch=self.engine.prompt_ids_batch)
        except ValueError as exc:
            from worker.settings import SettingsError

            raise SettingsError("model.max_input_tokens", str(exc), "a chunk size that holds two summaries") from None
        b = self.budget
        marks = Watermarks(high_tokens=4 * b, low_tokens=2 * b, high_messages=20_000, low_messages=10_000)
        self.ingest = Ingest(settings=settings, consumer_conf=consumer_conf, tracker=self.tracker,
                             registry=self.registry, packer=self.packer, planner=planner, delivery=self.delivery,
                             metrics=self.metrics, watermarks=marks)
        self.gpu = GpuLoop(settings=settings, engine=self.engine, packer=self.packer, registry=self.registry,
                           tracker=self.tracker, delivery=self.delivery, combine_q=self.ingest.combine_q,
                           metrics=self.metrics, budget=b)

    # ---- life cycle -------------------------------------------------------------------
    def start(self) -> Worker:
        if self.server:
            self.server.start()
        t = threading.Thread(target=self.delivery.run, name="ribbon-delivery", daemon=True)
        t.start()
        self.delivery.started.wait()
        self._threads = [t]
        gpu = [("ribbon-gpu", self.gpu.run)] if self.gpu is not None else []
        for name, target in gpu + [("ribbon-ingest", self.ingest.run)]:
            th = threading.Thread(target=target, name=name, daemon=True)
            th.start()
            self._threads.append(th)
        self._wire_consumer()
        return self

    def _wire_consumer(self) -> None:
        deadline = time.monotonic() + 30
        while self.ingest.consumer is None and time.monotonic() < deadline and self.ingest.error is None:
            time.sleep(0.01)
        self.delivery.consumer = self.ingest.consumer

    def failed(self) -> BaseException | None:
        return self.ingest.error or (self.gpu.error if self.gpu is not None else None) or self.delivery.error

    def drain(self, timeout_s: float) -> bool:
        """Stop taking input and wait until everything taken is delivered; True if it all went out."""
        self.draining.set()
        self.metrics.ready = False
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
        delivery, ingest = self._threads[0], self._threads[-1]
        self.ingest.stop.set()
        ingest.join(left())
        self.delivery.stop.set()
        self.delivery.wake()
        delivery.join(left())
        if self.gpu is not None:
            self.gpu.stop.set()
            self.packer.close()
            self._threads[1].join(left())
        if self.server:
            self.server.stop()
        return not any(t.is_alive() for t in self._threads)

    def run_until_signalled(self, stop: threading.Event | None = None) -> int:
        """Run until `stop` is set (by a signal: see install_signal_handlers) or a thread fails."""
        stop = stop or install_signal_handlers()
        self.start()
        while not stop.is_set() and self.failed() is None:
            stop.wait(0.2)
        if self.failed() is not None:
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
    """SIGTERM/SIGINT set the returned event (drain, commit, exit 0); a second one exits at once."""
    stop = threading.Event()
    signals: list[int] = []

    def on_signal(signum, _frame) -> None:
        signals.append(signum)
        if len(signals) > 1:
            log.warning("second signal: exiting now without committing")
            os._exit(128 + signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    return stop
