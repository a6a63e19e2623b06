"""One document's whole model-free pass, as plain data: what the preprocessing pool returns.

    prepare_many(texts, sources, kinds, options) -> [Prepared]

Per document, from one templater pass: the digest (plain dicts, the output's `digest`), the
highlights, the digest prompt (compacted text, when it passes the character gate) and, in digest
mode, the English rendering. Runs on the ingest thread or in a worker process of
worker/pipeline/preprocess.py: nothing here touches Kafka, torch or shared state, and the result
pickles cheaply (strings, dicts, lists). A document whose pass fails gets `error` set (its reason,
for the dead-letter topic); the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from worker.digest.compact import compact
from worker.digest.document import analyze_document
from worker.digest.prompt import digest_prompt
from worker.digest.render import render
from worker.digest.highlights import select


@dataclass(frozen=True)
class PrepareOptions:
    highlights: int          # model.highlights
    compaction: bool         # build the digest prompt (generative mode with digest.compaction)
    min_saving: float        # digest.min_saving (the character gate; tokens are checked by the caller)
    render: bool             # digest mode: render the digest as the summary


@dataclass(frozen=True)
class Prepared:
    digest: dict | None           # the output message's `digest` object (None when error)
    highlights: list[str]
    prompt: str | None            # the digest prompt when compaction passed the character gate, else None
    summary: str | None           # digest mode: the digest in English
    seconds: float                # CPU seconds of this document's pass
    error: str | None = None      # the pass failed: why (the document goes to the dead-letter topic)


def highlights(a, k: int) -> list[str]:
    """The failures' first lines in the failure ranking (one per template), then the highlight scorer's best
    lines of the other templates (worker/digest/highlights.py), k in all, none repeating a template."""
    tm = a.templates
    out = [tm.lines[f["first_line"]].strip() for f in a.failures[:k]]
    if len(out) < k:
        shape = tm.line_template.copy()
        for f in a.failures[:k]:
            shape[shape == f["template"]] = -1                      # [L] those templates are taken
        rest = select(tm.lines, shape, tm.line_severity, a.line_z, k - len(out))
        out += [ln for ln in rest if ln not in out]
    return out


def prepare(text: str, source: str | None, kind: str | None, o: PrepareOptions) -> Prepared:
    t0 = time.thread_time()
    lines = text.split("\n")
    a = analyze_document(text, lines)
    hl = highlights(a, o.highlights) if o.highlights else []
    prompt = None
    if o.compaction:
        c = compact(a, text, o.min_saving)
        prompt = digest_prompt(a.digest, c.text) if c.applied else None
    summary = render(a.digest, source, kind) if o.render else None
    return Prepared(a.digest, hl, prompt, summary, time.thread_time() - t0)


def prepare_many(texts: Sequence[str], sources: Sequence[str | None], kinds: Sequence[str | None],
                 o: PrepareOptions) -> list[Prepared]:
    """prepare() of each document; one that raises gets `error` (routed to the dead-letter topic by ingest)."""
    out = []
    for text, source, kind in zip(texts, sources, kinds):
        try:
            out.append(prepare(text, source, kind, o))
        except Exception as exc:  # noqa: BLE001 - routed: ingest dead-letters this document with the reason
            out.append(Prepared(None, [], None, None, 0.0, f"{type(exc).__name__}: {exc}"))
    return out
