"""Building a document's output message: the one place per-document output fields are made.

Called by the stage that finishes documents (today the GPU thread; the finishing
stage of docs/pipeline.md once it exists). Pure: no Kafka, no CUDA, no shared state.
Fields that need the document's text (highlights, and the digest once it exists)
are computed here, never on the GPU thread's hot path by anything else.
"""

from __future__ import annotations

from worker.messages import OutputMessage
from worker.service.docs import Doc
from worker.service.highlights import highlights


def build_output(doc: Doc, summary: str, *, settings, model_name: str, now: float) -> OutputMessage:
    """The output message of a finished document. `now` is time.monotonic() at finishing."""
    queued = (doc.first_gpu or now) - doc.received
    return OutputMessage(
        id=doc.doc_id, source=doc.meta.get("source"), kind=doc.meta.get("kind"),
        attributes=doc.meta.get("attributes"),
        input={"topic": doc.tp[0], "partition": doc.tp[1], "offset": doc.offset},
        summary=summary.strip(), highlights=highlights(doc.text.split("\n"), settings.model.highlights),
        mode=settings.model.mode, model=model_name,
        tokens={"input": doc.input_tokens, "output": doc.output_tokens, "chunks": doc.chunks},
        truncated=doc.truncated,
        timing_ms={"queued": round(queued * 1e3, 3), "gpu": round(doc.gpu_s * 1e3, 3),
                   "total": round((now - doc.received) * 1e3, 3)},
    )
