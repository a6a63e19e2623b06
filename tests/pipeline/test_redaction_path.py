"""Issue 41's acceptance: three credentials in a 23-line API log never reach the output, the prompt or the spans.

The real ingest (decode, the digest pass, planning) and finishing stages run over fakes of Kafka and the
packer; spans go to the SDK's in-memory exporter; log lines are captured with the worker's own filter.
"""

from __future__ import annotations

import dataclasses
import logging

import orjson
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ingest_fakes import FakePacker, Msg, PausingConsumer, counts, words
from stage_fakes import Wake
from worker.pipeline.configs import finishing_config, ingest_config
from worker.config.settings import load_settings
from worker.kafka.headers import parse_dead_letter_headers
from worker.observability.logs import Redact
from worker.observability.metrics import Metrics
from worker.observability.tracing import DocTracer
from worker.pipeline.commits import Commits
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.finishing import Finishing
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.ingest import Downstream, Ingest, Watermarks
from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker
from worker.redaction import Policy, install

SECRET_LINES = [
    "2024-05-01T10:00:07Z api-1 ERROR login failed for admin password=hunter2 from 10.1.2.3",
    "2024-05-01T10:00:12Z api-1 ERROR upstream 401 Authorization: Bearer "
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl",
    "2024-05-01T10:00:18Z api-1 WARN using key AKIAIOSFODNN7EXAMPLE secret=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
]
SECRETS = ["hunter2", "eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiJhZG1pbiJ9", "c2lnbmF0dXJl", "AKIAIOSFODNN7EXAMPLE",
           "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]


def api_log() -> str:
    """23 lines: 20 ordinary requests and the issue's three lines among them."""
    lines = [f"2024-05-01T10:00:{i:02d}Z api-1 INFO GET /v1/items/{100 + i} 200 {12 + i % 7} ms" for i in range(20)]
    for at, line in zip((7, 12, 18), SECRET_LINES):
        lines.insert(at, line)
    return "\n".join(lines)


def _stages(settings, tracer=None, packer=None, planner=None):
    tracker, registry, metrics, wake = OffsetTracker(), DocRegistry(), Metrics(), Wake()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=wake)
    shared = Shared(tracker, registry, metrics, dl)
    fin = Finishing(config=dataclasses.replace(finishing_config(settings, "m"), output_topic="out"), shared=shared, combine=lambda d: None, wake=wake,
                    tracer=tracer)
    marks = Watermarks(high_tokens=10_000, low_tokens=5_000, high_messages=10, low_messages=5)
    down = Downstream(packer, planner) if planner is not None else Downstream(finished=fin.submit_finished)
    ing = Ingest(config=ingest_config(settings, marks), shared=shared, make_consumer=PausingConsumer,
                 commits=Commits(tracker), downstream=down)
    ing.consumer = ing.make_consumer()
    tracker.assign(("in", 0))
    return ing, fin, tracker, metrics


def _value(**extra) -> bytes:
    return orjson.dumps({"text": api_log(), "source": "api-1", "kind": "log", **extra})


def test_digest_mode_summary_highlights_digest_and_spans_hold_no_secret():
    settings = load_settings(environ={"RIBBON_MODEL__MODE": "digest"})
    exporter = InMemorySpanExporter()
    tracer = DocTracer(exporter, batch=False)
    ing, fin, tracker, metrics = _stages(settings, tracer=tracer)
    ing._ingest([Msg(_value(attributes={"api_key": "k-9f8e7d6c5b4a", "team": "payments"}), 0)])
    ing._take_prepared(block=True)
    fin.stop()
    fin.run()
    (rec,) = [r for ready in tracker.take_ready() for r in ready.records]
    tracer.delivered([rec])
    tracer.close()
    spans = "".join(f"{s.name}{dict(s.attributes)}" for s in exporter.get_finished_spans())
    out = orjson.loads(rec.value)
    published = rec.value.decode() + spans
    for secret in SECRETS:
        assert secret not in published
    assert out["redactions"] == {"password": 1, "jwt": 1, "aws_key": 1, "secret": 1}
    assert out["attributes"] == {"api_key": "<redacted:api_key>", "team": "payments"}
    # the key and the rest of the line stay: lines, levels and templates are those of the original
    assert out["digest"]["lines"] == 23
    assert any("password=<redacted:password> from 10.1.2.3" in h for h in out["highlights"])
    text = out["summary"]["text"]
    assert "<redacted:" in text or "login failed" in text
    assert "ribbon.redactions.password" in spans
    assert metrics.registry.get_sample_value("ribbon_redactions_total", {"kind": "jwt"}) == 1


def test_the_model_prompt_holds_no_secret():
    seen: list[str] = []

    def prompt(text: str) -> list[int]:  # the planner's tokenizer: every text the model would see
        seen.append(text)
        return words(text)

    settings = load_settings(environ={})
    planner = Planner(prompt, counts, PlanLimits(4_096, max_new_tokens=4))
    ing, _, _, _ = _stages(settings, packer=FakePacker(), planner=planner)
    ing._ingest([Msg(_value(), 0)])
    ing._take_prepared(block=True)
    assert seen and any("<redacted:jwt>" in t for t in seen)
    for secret in SECRETS:
        assert all(secret not in t for t in seen)


def test_off_leaves_the_text_as_it_was():
    settings = load_settings(environ={"RIBBON_MODEL__MODE": "digest", "RIBBON_REDACTION__ENABLED": "false"})
    ing, fin, tracker, _ = _stages(settings)
    ing._ingest([Msg(_value(), 0)])
    ing._take_prepared(block=True)
    fin.stop()
    fin.run()
    (rec,) = [r for ready in tracker.take_ready() for r in ready.records]
    assert "hunter2" in rec.value.decode() and orjson.loads(rec.value)["redactions"] == {}


@pytest.fixture
def installed():
    yield install
    install(Policy())


@pytest.mark.parametrize("redact_value", [False, True])
def test_dead_letters_keep_the_bytes_unless_asked_and_their_reason_is_scrubbed(installed, redact_value):
    installed(Policy(dead_letters=redact_value))
    tracker, wake = OffsetTracker(), Wake()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=wake)
    epoch = tracker.assign(("in", 0))
    assert tracker.see(("in", 0), epoch, 0)
    raw = SECRET_LINES[0].encode()
    dl.send(("in", 0), epoch, 0, b"k", raw, "digest_error", f"ValueError: bad line {SECRET_LINES[0]}")
    (rec,) = [r for ready in tracker.take_ready() for r in ready.records]
    assert "hunter2" not in parse_dead_letter_headers(rec.headers).error_message
    assert (b"hunter2" in rec.value) is not redact_value


def test_the_worker_log_lines_hold_no_secret(caplog):
    caplog.handler.addFilter(Redact())
    with caplog.at_level(logging.WARNING):
        logging.getLogger("worker.test").warning("output of %s could not be built: %s", "d1", SECRET_LINES[2])
    assert "AKIAIOSFODNN7EXAMPLE" not in caplog.text and "<redacted:aws_key>" in caplog.text


def test_a_window_of_line_records_publishes_no_secret():
    settings = load_settings(environ={"RIBBON_MODEL__MODE": "digest", "RIBBON_WINDOWING__ENABLED": "true",
                                      "RIBBON_KAFKA__INPUT_TOPICS": "logs", "RIBBON_WINDOWING__TOPICS": "logs",
                                      "RIBBON_WINDOWING__MAX_LINES": "23", "RIBBON_WINDOWING__KEY_REGEX": r"Z (\S+) "})
    ing, fin, tracker, _ = _stages(settings)
    tracker.assign(("logs", 0))
    lines = api_log().split("\n") + ["2024-05-01T10:00:59Z api-1 INFO GET /v1/items/1 200 3 ms"]
    ing._ingest([Msg(line.encode(), off, _topic="logs", _ts=1_700_000_000 + off) for off, line in enumerate(lines)])
    ing._take_prepared(block=True)
    fin.stop()
    fin.run()
    (rec,) = [r for ready in tracker.take_ready() for r in ready.records]
    out = orjson.loads(rec.value)
    assert out["window"]["records"] == 23 and out["redactions"] == {"password": 1, "jwt": 1, "aws_key": 1, "secret": 1}
    for secret in SECRETS:
        assert secret not in rec.value.decode()


def test_a_bad_log_call_still_reaches_the_handler_and_raises_nothing():
    record = logging.LogRecord("worker.test", logging.WARNING, __file__, 1, "%s and %s", ("one",), None)
    assert Redact().filter(record) is True
