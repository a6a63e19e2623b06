"""OpenTelemetry traces: one span per document, from poll to produce.

Off unless an OTLP endpoint is configured: `tracing.otlp_endpoint` (RIBBON_TRACING__OTLP_ENDPOINT), else the
standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT (OTLP over HTTP/protobuf).

The spans are built from the timings a document already carries (worker/pipeline/inflight.py: `received` at poll,
`packed` when ingest handed it to the packer, `first_gpu` / `model_end` around its bins, `gpu_s` its share
of their model time), so the pipeline has two hooks only:

- `headers(doc, headers, now)`: finishing, as it builds the output record. Starts the document span (its
  start is the poll), records its finished children, opens the delivery child, and returns the record's
  headers with `traceparent` / `tracestate` replaced by the document span's: the output continues the trace
  at the worker.
- `delivered(records)`: delivery, once records are committed (exactly_once) or acknowledged
  (at_least_once). Ends the delivery span and the document span of each output record.

    ribbon.document   poll → produced; parent: the input record's traceparent (linked as well); a window's
                      document links to the spans of its records (their traceparents)
      ribbon.digest   poll → handed to the packer (digest pass, compaction, tokenization); digest mode:
                      poll → finished
      ribbon.queue    handed to the packer → its first bin starts
      ribbon.model    first bin starts → last bin ends; attributes: its share of those bins' model seconds,
                      and of their prefill and decode seconds where the GPU loop records them
      ribbon.delivery output built → committed

Documents that never reach delivery (revoked partitions, dead letters after finishing) keep an open span
until `max_open` newer ones push it out, or until `close()`: it ends then with an error status.
Thread-safe: finishing and delivery call it from their own threads.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from worker import __version__
from worker.config.settings import SettingsError
from worker.kafka.headers import TRACE_HEADERS, TRACEPARENT, trace_parent
from worker.redaction import scrub

_PROPAGATOR = TraceContextTextMapPropagator()


def otlp_endpoint(settings, environ: Mapping[str, str] | None = None) -> str | None:
    """Where spans go (a full OTLP/HTTP traces URL), or None: tracing is off."""
    env = os.environ if environ is None else environ
    base = settings.tracing.otlp_endpoint
    if base:
        return base if base.rstrip("/").endswith("/v1/traces") else base.rstrip("/") + "/v1/traces"
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]  # used as is, as the OTel specification says
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    return None


def make_tracer(settings, environ: Mapping[str, str] | None = None) -> DocTracer | None:
    """The worker's tracer, or None when no endpoint is configured (nothing is imported or started)."""
    endpoint = otlp_endpoint(settings, environ)
    if endpoint is None:
        return None
    env = os.environ if environ is None else environ
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol not in (None, "", "http/protobuf"):
        raise SettingsError("tracing.otlp_endpoint", f"OTLP protocol {protocol!r} (OTEL_EXPORTER_OTLP_PROTOCOL) "
                            "is not supported", "http/protobuf")
    # the OTLP exporter (requests, protobuf: ~0.3 s) only when an endpoint is set
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415 ~0.3 s

    return DocTracer(OTLPSpanExporter(endpoint=endpoint), service_name=env.get("OTEL_SERVICE_NAME")
                     or settings.tracing.service_name, sample_ratio=settings.tracing.sample_ratio,
                     group=settings.kafka.group_id)


@dataclass
class _Open:
    doc_span: Any
    delivery_span: Any


class DocTracer:
    """Spans per document (see the module docstring). `batch=False` exports each span as it ends (tests)."""

    def __init__(self, exporter: SpanExporter, *, service_name: str = "ribbon", sample_ratio: float = 1.0,
                 group: str | None = None, batch: bool = True, max_open: int = 100_000) -> None:
        resource = Resource.create({"service.name": service_name, "service.version": __version__})
        self.provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(sample_ratio)))
        self.provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("ribbon", __version__)
        self.group, self.max_open = group, max_open
        self._open: OrderedDict[bytes, _Open] = OrderedDict()  # the output's traceparent -> its open spans
        self._lock = threading.Lock()

    # ---- hook 1: finishing builds the output record --------------------------------------------------
    def headers(self, doc, headers: tuple, now: float) -> tuple:
        """Start `doc`'s spans; return `headers` with the trace headers replaced by the document span's.
        `now` is time.monotonic() at finishing."""
        ns = _MonoToEpoch()
        parent = _PROPAGATOR.extract({k: v.decode("latin-1") for k, v in headers if k in TRACE_HEADERS
                                      and v is not None})
        parent_span = trace.get_current_span(parent).get_span_context()
        links = [Link(parent_span)] if parent_span.is_valid else []
        links += _window_links(doc)
        span = self.tracer.start_span("ribbon.document", context=parent, kind=SpanKind.CONSUMER, links=links,
                                      start_time=ns(doc.received), attributes=self._doc_attributes(doc))
        ctx = trace.set_span_in_context(span)
        for name, start, end, attrs in _stages(doc, now):
            self.tracer.start_span(name, context=ctx, start_time=ns(start), attributes=attrs).end(end_time=ns(end))
        delivery = self.tracer.start_span("ribbon.delivery", context=ctx, start_time=ns(now))
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=ctx)
        out = (*((k, v) for k, v in headers if k not in TRACE_HEADERS),
               *((k, carrier[k].encode()) for k in TRACE_HEADERS if k in carrier))
        if TRACEPARENT in carrier:
            self._remember(carrier[TRACEPARENT].encode(), _Open(span, delivery))
        return out

    def _doc_attributes(self, doc) -> dict[str, Any]:
        a: dict[str, Any] = {"messaging.system": "kafka", "messaging.operation.type": "process",
                             "messaging.destination.name": doc.tp[0],
                             "messaging.destination.partition.id": str(doc.tp[1]),
                             "messaging.kafka.offset": doc.offset, "messaging.message.id": scrub(doc.doc_id),
                             "ribbon.tokens.input": doc.input_tokens, "ribbon.tokens.output": doc.output_tokens,
                             "ribbon.chunks": doc.chunks}
        if self.group:
            a["messaging.consumer.group.name"] = self.group
        for key in ("source", "kind"):
            if doc.meta.get(key):
                a[f"ribbon.{key}"] = scrub(str(doc.meta[key]))  # as in log lines: no secret (worker/redaction/)
        return a

    def _remember(self, key: bytes, spans: _Open) -> None:
        with self._lock:
            self._open[key] = spans
            while len(self._open) > self.max_open:
                _, old = self._open.popitem(last=False)
                _end(old, "not delivered while traced (revoked, dead-lettered or too many open)")

    # ---- hook 2: delivery has committed records --------------------------------------------------
    def delivered(self, records: Iterable) -> int:
        """End the spans of these records (the output records of a committed step); returns how many."""
        done = []
        with self._lock:
            for rec in records:
                parent = trace_parent(rec.headers)
                spans = self._open.pop(parent, None) if parent is not None else None
                if spans is not None:
                    done.append(spans)
        for spans in done:
            _end(spans, None)
        return len(done)

    def __len__(self) -> int:  # spans still open (documents not yet delivered)
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """End what is still open (as not delivered), export what is buffered, stop the exporter."""
        with self._lock:
            left, self._open = list(self._open.values()), OrderedDict()
        for spans in left:
            _end(spans, "not delivered before shutdown")
        self.provider.shutdown()


def _window_links(doc) -> list:
    """A window's document span links to each of its records' spans (their `traceparent`s, at most
    worker/windowing/windows.py MAX_LINKS)."""
    out = []
    for value in getattr(getattr(doc, "window", None), "traceparents", None) or ():
        ctx = _PROPAGATOR.extract({TRACEPARENT: value.decode("latin-1")})
        sc = trace.get_current_span(ctx).get_span_context()
        if sc.is_valid:
            out.append(Link(sc, {"ribbon.link": "window record"}))
    return out


def _end(spans: _Open, error: str | None) -> None:
    for s in (spans.delivery_span, spans.doc_span):
        if error is not None:
            s.set_status(Status(StatusCode.ERROR, error))
        s.end()


def _stages(doc, now: float) -> list[tuple[str, float, float, dict[str, Any]]]:
    """The finished child spans of a document: (name, start, end, attributes), times in time.monotonic()."""
    cpu = getattr(doc.prepared, "seconds", None)
    digest_attrs = {"ribbon.digest.cpu_seconds": float(cpu)} if cpu is not None else {}
    found = getattr(doc.prepared, "redactions", None) or {}  # counts by kind, never a value (worker/redaction/)
    digest_attrs.update({f"ribbon.redactions.{k}": n for k, n in found.items()})
    if doc.packed is None:  # no model round (digest mode): ingest handed it straight to finishing
        return [("ribbon.digest", doc.received, now, digest_attrs)]
    out = [("ribbon.digest", doc.received, doc.packed, digest_attrs)]
    if doc.first_gpu is not None:
        out.append(("ribbon.queue", doc.packed, doc.first_gpu, {}))
        end = doc.model_end if doc.model_end is not None else now
        model = {"ribbon.model.share_seconds": float(doc.gpu_s), "ribbon.tokens.input": doc.input_tokens,
                 "ribbon.tokens.output": doc.output_tokens, "ribbon.chunks": doc.chunks}
        for key in ("prefill_s", "decode_s"):  # per-document shares of a bin's phases, where the loop keeps them
            if getattr(doc, key, None) is not None:
                model[f"ribbon.model.{key.replace('_s', '_seconds')}"] = float(getattr(doc, key))
        out.append(("ribbon.model", doc.first_gpu, end, model))
    return out


class _MonoToEpoch:
    """time.monotonic() values as epoch nanoseconds (what OTel wants), with one offset per call site."""

    def __init__(self) -> None:
        self.offset = time.time_ns() - time.monotonic_ns()

    def __call__(self, t: float) -> int:
        return int(t * 1e9) + self.offset
