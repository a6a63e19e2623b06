"""OpenTelemetry traces: a document's spans from its timings, the output's traceparent, the end at commit.

Spans go to the SDK's in-memory exporter; finishing runs for real (with fakes of its neighbours), and the
records it makes are handed to the tracer as delivery hands them after a commit.
"""

from __future__ import annotations

import dataclasses
import orjson
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from stage_fakes import Wake, make_doc
from worker.pipeline.configs import finishing_config
from worker.observability.tracing import DocTracer, make_tracer, otlp_endpoint
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.finishing import Finishing
from worker.pipeline.stage import Shared
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker
from worker.config.settings import SettingsError, load_settings

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
INPUT_TP = f"00-{TRACE_ID}-{PARENT_ID}-01".encode()


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    tracer = DocTracer(exporter, batch=False, group="g", max_open=3)
    tracker, metrics, wake = OffsetTracker(), Metrics(), Wake()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=wake)
    fin = Finishing(config=dataclasses.replace(finishing_config(load_settings(environ={}), "m"), output_topic="out"),
                    shared=Shared(tracker, DocRegistry(), metrics, dl), combine=lambda d: None, wake=wake,
                    clock=lambda: 10.0, tracer=tracer)
    yield fin, tracker, tracer, exporter
    tracer.close()


def _finish(fin: Finishing, docs) -> list:
    for d in docs:
        fin.submit_finished(d, "summary")
    fin.stop()
    fin.run()
    assert fin.error is None
    return [rec for r in fin.tracker.take_ready() for rec in r.records]


def _model_doc(tracker, offset: int, headers=(("traceparent", INPUT_TP), ("tracestate", b"v=1"), ("x", b"y"))):
    d = make_doc(tracker, offset=offset)
    d.headers = headers
    d.received, d.packed, d.first_gpu, d.model_end, d.gpu_s = 1.0, 1.5, 4.0, 6.0, 0.25
    d.input_tokens, d.output_tokens = 40, 7
    return d


def test_one_span_per_document_poll_to_commit_with_its_stages(traced):
    fin, tracker, tracer, exporter = traced
    (rec,) = _finish(fin, [_model_doc(tracker, 5)])
    assert exporter.get_finished_spans() and len(tracer) == 1  # children done; document and delivery open
    assert tracer.delivered([rec]) == 1 and len(tracer) == 0
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"ribbon.document", "ribbon.digest", "ribbon.queue", "ribbon.model", "ribbon.delivery"}
    doc = spans["ribbon.document"]
    # the input's trace continues: same trace, the input's span is the parent (and a link)
    assert f"{doc.context.trace_id:032x}" == TRACE_ID and f"{doc.parent.span_id:016x}" == PARENT_ID
    assert [f"{link.context.span_id:016x}" for link in doc.links] == [PARENT_ID]
    assert doc.kind == SpanKind.CONSUMER
    assert doc.attributes["messaging.kafka.offset"] == 5 and doc.attributes["messaging.consumer.group.name"] == "g"
    for name in ("ribbon.digest", "ribbon.queue", "ribbon.model", "ribbon.delivery"):
        assert spans[name].parent.span_id == doc.context.span_id and spans[name].context.trace_id == doc.context.trace_id
    # the stages follow each other as the document's timings say (seconds between them kept)
    sec = lambda a, b: (b - a) / 1e9  # noqa: E731
    d, q, m, dl = spans["ribbon.digest"], spans["ribbon.queue"], spans["ribbon.model"], spans["ribbon.delivery"]
    assert d.start_time == doc.start_time and sec(d.start_time, d.end_time) == pytest.approx(0.5, abs=1e-6)
    assert d.end_time == q.start_time and sec(q.start_time, q.end_time) == pytest.approx(2.5, abs=1e-6)
    assert q.end_time == m.start_time and sec(m.start_time, m.end_time) == pytest.approx(2.0, abs=1e-6)
    assert sec(doc.start_time, dl.start_time) == pytest.approx(9.0, abs=1e-6)  # output built at clock 10.0
    assert doc.end_time >= dl.end_time >= dl.start_time
    assert m.attributes["ribbon.model.share_seconds"] == 0.25 and m.attributes["ribbon.tokens.output"] == 7
    # the output's traceparent is the worker's document span; other headers travel unchanged
    h = rec.headers
    assert dict(h)["traceparent"] == f"00-{TRACE_ID}-{doc.context.span_id:016x}-01".encode()
    assert dict(h)["tracestate"] == b"v=1" and ("x", b"y") in h
    assert [k for k, _ in h].count("traceparent") == 1


def test_a_document_without_a_traceparent_starts_a_trace_and_digest_mode_has_one_stage(traced):
    fin, tracker, tracer, exporter = traced
    d = make_doc(tracker, offset=0)
    d.headers, d.received = (), 2.0
    (rec,) = _finish(fin, [d])
    tracer.delivered([rec])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"ribbon.document", "ribbon.digest", "ribbon.delivery"}
    assert spans["ribbon.document"].parent is None and spans["ribbon.document"].links == ()
    assert dict(rec.headers)["traceparent"].decode().split("-")[1] == f"{spans['ribbon.document'].context.trace_id:032x}"


def test_undelivered_documents_end_as_errors_and_spans_stay_bounded(traced):
    fin, tracker, tracer, exporter = traced
    recs = _finish(fin, [_model_doc(tracker, o) for o in range(5)])
    assert len(tracer) == 3  # max_open: the two oldest were ended as not delivered
    ended = [s for s in exporter.get_finished_spans() if s.name == "ribbon.document"]
    assert len(ended) == 2 and all(s.status.status_code == StatusCode.ERROR for s in ended)
    assert tracer.delivered(recs) == 3  # the rest commit normally
    tracer.delivered(recs)  # a repeat finds nothing open
    docs = [s for s in exporter.get_finished_spans() if s.name == "ribbon.document"]
    assert len(docs) == 5 and sum(s.status.status_code == StatusCode.ERROR for s in docs) == 2


def test_tracing_is_off_unless_an_endpoint_is_configured():
    s = load_settings(environ={})
    assert otlp_endpoint({}) is None and make_tracer(s, {}) is None
    assert otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    assert otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}) == "http://t:1/x"
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_TRACES_SAMPLER_ARG": "0.5"}
    tracer = make_tracer(s, otel)
    try:
        assert isinstance(tracer, DocTracer)
    finally:
        tracer.close()
    with pytest.raises(SettingsError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        make_tracer(s, {**otel, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(SettingsError, match="OTEL_TRACES_SAMPLER_ARG.*'2' is not a sampling ratio"):
        make_tracer(s, {**otel, "OTEL_TRACES_SAMPLER_ARG": "2"})
    with pytest.raises(SettingsError, match="RIBBON_TRACING__OTLP_ENDPOINT.*removed: OpenTelemetry"):
        load_settings(environ={"RIBBON_TRACING__OTLP_ENDPOINT": "http://otel:4318"})


@pytest.mark.slow
def test_a_worker_traces_each_document_from_poll_to_commit(broker, new_topic, monkeypatch):
    """The whole worker (digest mode, the embedded broker): each output's traceparent is its document span,
    a child of the input's, and the span ends once the output is committed."""
    import uuid

    from helpers import read_until_ids, topics, wait_for
    from worker.kafka import clients
    from worker.kafka.config import embedded_settings, plain_config
    from worker.pipeline import app

    exporter = InMemorySpanExporter()
    tracer = DocTracer(exporter, batch=False)
    monkeypatch.setattr(app, "make_tracer", lambda settings: tracer)
    t = topics(new_topic, partitions=2)
    settings = embedded_settings(load_settings(environ={
        "RIBBON_KAFKA__INPUT_TOPICS": t["input_topic"], "RIBBON_KAFKA__OUTPUT_TOPIC": t["output_topic"],
        "RIBBON_KAFKA__DLQ_TOPIC": t["dlq_topic"], "RIBBON_KAFKA__GROUP_ID": f"g-{uuid.uuid4().hex[:8]}",
        "RIBBON_MODEL__MODE": "digest", "RIBBON_SERVER__PORT": "0"}), broker.bootstrap)
    worker = app.Worker(settings, broker.bootstrap).start()
    try:
        ids = {f"d{i}" for i in range(6)}
        p = clients.producer(plain_config(broker.bootstrap).tool_producer())
        for i in range(6):
            tp = f"00-{TRACE_ID[:-2]}{i:02x}-{PARENT_ID}-01".encode()
            p.produce(t["input_topic"], value=orjson.dumps({"id": f"d{i}", "text": f"ERROR disk {i} full"}),
                      key=f"k{i}".encode(), headers=[("traceparent", tp)])
        assert p.flush(30) == 0
        got = read_until_ids(broker.bootstrap, t["output_topic"], ids, timeout_s=60)
        wait_for(lambda: len(tracer) == 0 and len(_docs(exporter)) >= 6, 30, "the document spans to end")
    finally:
        worker.drain(10)
        worker.close()
    spans = _docs(exporter)
    for m in got:
        out_tp = dict(m.headers())["traceparent"].decode().split("-")
        span = spans[int(out_tp[2], 16)]
        i = int(orjson.loads(m.value())["id"][1:])
        assert f"{span.context.trace_id:032x}" == TRACE_ID[:-2] + f"{i:02x}"  # the input's trace goes on
        assert f"{span.parent.span_id:016x}" == PARENT_ID and span.status.is_ok
        assert span.attributes["messaging.destination.name"] == t["input_topic"]


def _docs(exporter) -> dict[int, object]:
    return {s.context.span_id: s for s in exporter.get_finished_spans() if s.name == "ribbon.document"}


def test_the_model_span_carries_each_documents_share_of_prefill_and_decode(traced):
    """The GPU stage shares a bin's prefill and decode seconds (the engine's stats) over its documents."""
    from stage_fakes import FakePacker, FakeSink, Generated, bin_of, gpu_stage, registered
    from worker.packer import PackerConfig

    class PhasedEngine:
        name = "fake"

        def __init__(self) -> None:
            self.stats = {"oom_splits": 0, "prefill_s": 10.0, "decode_s": 20.0}

        def stage(self, tokens, cu, max_seqlen):
            return type("Staged", (), {"wait_copied": lambda self: None, "n": len(cu) - 1})()

        def generate(self, staged, seeds):
            self.stats["prefill_s"] += 0.3  # this bin: 0.3 s prefill, 0.9 s decode
            self.stats["decode_s"] += 0.9
            return [Generated("x", [1]) for _ in range(staged.n)]

    fin, tracker, tracer, exporter = traced
    registry, sink = DocRegistry(), FakeSink()
    docs = [_model_doc(tracker, o) for o in range(3)]
    for d in docs:
        d.first_gpu = d.model_end = None
    sids = [registered(registry, d, [[1, 2]])[0] for d in docs]
    packer = FakePacker([bin_of(0, sids, [[1, 2]] * 3)], config=PackerConfig(budget=100, reserve_per_seq=4))
    stage = gpu_stage(PhasedEngine(), packer, Shared(tracker, registry, Metrics()), sink)
    stage.start()
    assert sink.got.wait(10)
    stage.stop()
    assert stage.join(5)
    assert [d.prefill_s for d in docs] == pytest.approx([0.1] * 3) and [d.decode_s for d in docs] == \
        pytest.approx([0.3] * 3)
    recs = _finish(fin, docs[:1])
    tracer.delivered(recs)
    (model,) = [s for s in exporter.get_finished_spans() if s.name == "ribbon.model"]
    assert model.attributes["ribbon.model.prefill_seconds"] == pytest.approx(0.1)
    assert model.attributes["ribbon.model.decode_seconds"] == pytest.approx(0.3)


def test_a_windows_span_links_to_its_records_and_its_output_keeps_their_common_headers(traced):
    from worker.windowing.windows import Rules, Windower

    fin, tracker, tracer, exporter = traced
    w = Windower(Rules(), clock=lambda: 1.0)
    parents = [f"00-{i:032x}-{i:016x}-01".encode() for i in (1, 2)]
    for off, tp in enumerate(parents):
        w.add(("in", 0), 1, "web-1", off, f"line {off}", headers=[("tenant", b"acme"), ("traceparent", tp)])
    (window,) = w.flush()
    d = make_doc(tracker, offset=0)
    d.window, d.headers, d.received = window, tuple(window.headers), 2.0
    (rec,) = _finish(fin, [d])
    tracer.delivered([rec])
    doc = next(s for s in exporter.get_finished_spans() if s.name == "ribbon.document")
    assert doc.parent is None   # a window has many parents: it starts its own trace and links to each
    assert [(f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in doc.links] == [
        (f"{i:032x}", f"{i:016x}") for i in (1, 2)]
    assert ("tenant", b"acme") in rec.headers
