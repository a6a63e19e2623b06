"""Digest mode's finishing: a document goes from ingest straight to delivery, with no model.

Its summary is the digest in plain English (worker/digest/render.py); the output
message is built by build_output like any other. Runs on the ingest thread.
Kept in its own file so that it can become a call of the finishing stage
(docs/pipeline.md: `Finishing.submit_finished(doc, summary_text)`) once that exists.
A document whose output cannot be built goes to the dead-letter topic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from worker.messages import encode_output
from worker.ops.headers import output_headers
from worker.service.docs import Doc
from worker.service.outputs import build_output, digest_summary
from worker.service.tracker import OffsetTracker, Record

log = logging.getLogger(__name__)

MODEL_NAME = "digest"  # the output's `model` in digest mode

DeadLetterFn = Callable[[Doc, str, str], None]  # (doc, error class, message)


def finish_digest(doc: Doc, *, settings, tracker: OffsetTracker, delivery, metrics, dead_letter: DeadLetterFn) -> None:
    now = time.monotonic()
    try:
        out = encode_output(build_output(doc, digest_summary(doc), settings=settings, model_name=MODEL_NAME, now=now))
    except (ValueError, TypeError) as exc:  # pydantic, orjson (e.g. lone surrogates): this document only
        log.warning("document %s: output could not be built: %s", doc.doc_id, exc)
        dead_letter(doc, "output_error", f"{type(exc).__name__}: {exc}")
        return
    key = doc.key if doc.key is not None else doc.doc_id.encode()
    rec = Record(settings.kafka.output_topic, key, out, output_headers(doc.headers, doc.tp[0], doc.tp[1], doc.offset))
    if tracker.complete(doc.tp, doc.epoch, doc.offset, (rec,)):
        metrics.latency.observe(now - doc.received)
        delivery.wake()
