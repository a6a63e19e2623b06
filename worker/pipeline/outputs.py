"""Building a document's output message: the one place per-document output fields are made.

Called by the finishing stage (worker/pipeline/finishing.py) for every document,
generative or digest mode. Pure: no Kafka, no CUDA, no shared state.
The digest and the highlights come from the document's one digest pass
(doc.prepared, made by ingest, in the preprocessing pool or on its thread);
a document without one gets it here.
"""

from __future__ import annotations

from worker.digest.prepared import PrepareOptions, Prepared, prepare
from worker.digest.render import render
from worker.messages.models import OutputMessage
from worker.pipeline.gate import Verdict, judge
from worker.pipeline.grounding import Checked, check
from worker.pipeline.inflight import Doc
from worker.pipeline.lines import window_info
from worker.redaction import scrub_tree


def prepared_of(doc: Doc, highlights: int) -> Prepared:
    """The document's pass (made by ingest); a document without one gets it here."""
    if doc.prepared is None:
        doc.prepared = prepare(doc.text, doc.meta.get("source"), doc.meta.get("kind"),
                               PrepareOptions(highlights=highlights, compaction=False, min_saving=0.0, render=True))
    return doc.prepared


def build_output(doc: Doc, summary: str, *, config, now: float) -> OutputMessage:
    """The output message of a finished document. `config`: finishing's (worker/pipeline/finishing.py:
    `model_name`, `mode`, `highlights`, `grounding`); `now` is time.monotonic() at finishing."""
    p = prepared_of(doc, config.highlights)
    grounding, published = None, {"text": summary, "source": "digest", "reason": "digest_mode"}
    if config.mode == "generative":
        published, grounding = publish(doc, p, summary, config.grounding)
    queued = (doc.first_gpu or now) - doc.received
    return OutputMessage(
        id=doc.doc_id, source=doc.meta.get("source"), kind=doc.meta.get("kind"),
        attributes=scrub_tree(doc.meta.get("attributes")),
        input={"topic": doc.tp[0], "partition": doc.tp[1], "offset": doc.offset},
        summary={**published, "text": published["text"].strip()},
        highlights=p.highlights, digest=p.digest, mode=config.mode, model=config.model_name,
        tokens={"input": doc.input_tokens, "document": doc.document_tokens or 0, "output": doc.output_tokens,
                "chunks": doc.chunks},
        truncated=doc.truncated,
        timing_ms={"queued": round(queued * 1e3, 3), "gpu": round(doc.gpu_s * 1e3, 3),
                   "total": round((now - doc.received) * 1e3, 3),
                   "ingest": round(_since(doc.received, doc.packed), 3),
                   "model_done": round(_since(doc.received, doc.model_end), 3)},
        grounding=grounding,
        window=window_info(doc),
        redactions=p.redactions or {},
    )


def verdict_of(doc: Doc, p: Prepared, text: str, action: str) -> tuple[Verdict, Checked]:
    """The publish gate's verdict on a model text (worker/pipeline/gate.py), after the grounding check
    (generation.grounding `action`), and that check's result."""
    checked = check(text, doc.text, p.digest, "", action,
                    extra=" ".join(str(doc.meta.get(k) or "") for k in ("source", "kind")))
    grounded = not (checked.grounding.fallback and checked.grounding.unsupported)  # an empty text: `content`
    return judge(checked.text if grounded else text, doc.text, p.digest, grounded), checked


def publish(doc: Doc, p: Prepared, text: str, action: str) -> tuple[dict, dict]:
    """The published summary (the model's text when it passes the grounding check and the publish gate,
    else the digest rendering) and the grounding report."""
    verdict, checked = verdict_of(doc, p, text, action)
    if verdict.source == "model":
        return {"text": checked.text, **verdict.as_dict()}, checked.grounding.as_dict()
    rendering = p.summary or render(p.digest, doc.meta.get("source"), doc.meta.get("kind"))
    return {"text": rendering, **verdict.as_dict()}, checked.grounding.as_dict()


def _since(t0: float, t: float | None) -> float:
    """Milliseconds from t0 to t (0 when t was never reached, e.g. in digest mode)."""
    return max(0.0, (t - t0) * 1e3) if t is not None else 0.0
