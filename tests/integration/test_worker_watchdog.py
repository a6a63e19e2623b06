"""Every wait on the model is bounded, the model in the worker's own process too (engine.process = off):
a model that stops returning anything with documents on it ends the worker with exit 1 and a log line
naming pipeline.stall_timeout_s and its environment variable."""

from __future__ import annotations

import logging
import threading
import uuid

import orjson
from helpers import produce, topics

from worker.config.settings import load_settings
from worker.demo.samples import document
from worker.engine.continuous import ContinuousBatcher
from worker.kafka.config import embedded_settings
from worker.pipeline import app


def test_a_hung_model_in_this_process_ends_the_worker_with_exit_1(broker, new_topic, tiny_model, monkeypatch, caplog):
    hung = threading.Event()
    release = threading.Event()

    def step(self):
        hung.set()
        release.wait()  # the model never returns while the test runs
        raise RuntimeError("released")

    monkeypatch.setattr(ContinuousBatcher, "step", step)
    t = topics(new_topic)
    settings = embedded_settings(load_settings(environ={
        "RIBBON_KAFKA__INPUT_TOPICS": t["input_topic"], "RIBBON_KAFKA__OUTPUT_TOPIC": t["output_topic"],
        "RIBBON_KAFKA__DLQ_TOPIC": t["dlq_topic"], "RIBBON_KAFKA__GROUP_ID": f"g-{uuid.uuid4().hex[:8]}",
        "RIBBON_MODEL__PATH": tiny_model, "RIBBON_ENGINE__PROCESS": "off", "RIBBON_BATCHING__MODE": "continuous",
        "RIBBON_ENGINE__DEVICE": "cpu", "RIBBON_GENERATION__MAX_NEW_TOKENS": "4", "RIBBON_BATCHING__TOKEN_BUDGET": "4096",
        "RIBBON_PIPELINE__STALL_TIMEOUT_S": "2", "RIBBON_SERVER__PORT": "0"}), broker.bootstrap)
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(document(i, n_lines=2, seed=8)) for i in range(20)])
    worker = app.Worker(settings, broker.bootstrap)
    rc: list[int] = []
    runner = threading.Thread(target=lambda: rc.append(worker.run_until_signalled(threading.Event())), daemon=True)
    try:
        with caplog.at_level(logging.ERROR):
            runner.start()
            assert hung.wait(120), "the model was never reached"
            runner.join(120)
        assert rc == [1]
        assert "RIBBON_PIPELINE__STALL_TIMEOUT_S" in caplog.text and "the worker exits 1" in caplog.text
    finally:
        release.set()
