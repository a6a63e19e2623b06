"""Building a document's output message: the one place per-document output fields are made.

Called by the finishing stage (worker/service/finishing.py) for every document,
generative or digest mode. Pure: no Kafka, no CUDA, no shared state.
The digest and the highlights come from the document's one digest pass
(doc.analysis, made on the ingest thread); a document without one gets it here.
"""

from __future__ import annotations

from worker.digest.digest import Analysis, build_digest
from worker.digest.render import render
from worker.digest.templates import analyze
from worker.messages import OutputMessage
from worker.service.docs import Doc
from worker.service.highlights import select


def analysis_of(doc: Doc) -> Analysis:
    if doc.analysis is None:
        doc.analysis = build_digest(analyze(doc.text.split("\n")))
    return doc.analysis


def digest_summary(doc: Doc) -> str:
    """Digest mode's summary: the digest in plain English."""
    return render(analysis_of(doc).digest, doc.meta.get("source"), doc.meta.get("kind"))


def build_output(doc: Doc, summary: str, *, settings, model_name: str, now: float) -> OutputMessage:
    """The output message of a finished document. `now` is time.monotonic() at finishing."""
    a = analysis_of(doc)
    tm = a.templates
    queued = (doc.first_gpu or now) - doc.received
    return OutputMessage(
        id=doc.doc_id, source=doc.meta.get("source"), kind=doc.meta.get("kind"),
        attributes=doc.meta.get("attributes"),
        input={"topic": doc.tp[0], "partition": doc.tp[1], "offset": doc.offset},
        summary=summary.strip(),
        highlights=select(tm.lines, tm.line_template, tm.line_severity, a.line_z, settings.model.highlights),
        digest=a.digest, mode=settings.model.mode, model=model_name,
        tokens={"input": doc.input_tokens, "document": doc.document_tokens, "output": doc.output_tokens,
                "chunks": doc.chunks},
        truncated=doc.truncated,
        timing_ms={"queued": round(queued * 1e3, 3), "gpu": round(doc.gpu_s * 1e3, 3),
                   "total": round((now - doc.received) * 1e3, 3)},
    )
