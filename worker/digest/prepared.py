"""One document's whole model-free pass, as plain data: what the preprocessing pool returns.

    prepare_many(texts, sources, kinds, options) -> [Prepared]

Per document, first the redaction pass (worker/redaction/: secrets' values become `<redacted:kind>`;
the redacted text comes back in `text` and replaces the document's), then from one templater pass:
the digest (plain dicts, the output's `digest`), the highlights, the digest prompt (compacted text,
when it passes the character gate) and, in digest mode, the English rendering. Runs on the ingest
thread or in a worker process of worker/pipeline/preprocess.py: nothing here touches Kafka, torch or
shared state, and the result pickles cheaply (strings, dicts, lists). A document whose pass fails
gets `error` set (its reason, for the dead-letter topic); the others go on.

In a pool process given the model's tokenizer (`use_tokenizer`: a copy of its Rust backend), each
document with a digest prompt also gets the token counts of the compaction gate (`raw_tokens`,
`prompt_tokens`: the raw text and the digest prompt, counted as the planner's `count` does, specials
split as text), so the ingest thread does not tokenize the raw document to decide.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from worker.digest.compact import compact
from worker.digest.document import analyze_document
from worker.digest.prompt import digest_prompt, kept_by_bytes
from worker.digest.render import render
from worker.digest.highlights import select
from worker.redaction import Policy, redactor


@dataclass(frozen=True)
class PrepareOptions:
    highlights: int          # digest.highlights
    compaction: bool         # build the digest prompt (generative mode with digest.compaction)
    min_saving: float        # digest.min_saving (the character gate; tokens are checked by the caller)
    render: bool             # digest mode: render the digest as the summary
    redaction: Policy = Policy()  # secrets out before anything is made of the text (worker/redaction/)


@dataclass(frozen=True)
class Prepared:
    digest: dict | None           # the output message's `digest` object (None when error)
    highlights: list[str]
    prompt: str | None            # the digest prompt when compaction passed the character gate, else None
    summary: str | None           # digest mode: the digest in English
    seconds: float                # CPU seconds of this document's pass
    error: str | None = None      # the pass failed: why (the document goes to the dead-letter topic)
    raw_tokens: int | None = None     # the gate's counts, when the pool counted them (see use_tokenizer):
    prompt_tokens: int | None = None  # tokens of the raw text and of `prompt`; None: not counted here
    text: str | None = None       # the redacted text, when a secret was found (it replaces the document's text)
    redactions: dict[str, int] | None = None  # secrets replaced, by kind (None: none)


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
    text, found = redactor(o.redaction).text(text)
    lines = text.split("\n")
    a = analyze_document(text, lines)
    hl = highlights(a, o.highlights) if o.highlights else []
    prompt = None
    if o.compaction:
        c = compact(a, text, o.min_saving)
        prompt = digest_prompt(a.digest, c.text) if c.applied else None
    summary = render(a.digest, source, kind) if o.render else None
    return Prepared(a.digest, hl, prompt, summary, time.thread_time() - t0,
                    text=text if found else None, redactions=found or None)


_tokenizer = None  # this process's copy of the model's tokenizer backend (tokenizers.Tokenizer), if given
_max_bytes: int | None = None  # a longer raw text is left to the planner's count (by slices, never whole)


def use_tokenizer(backend, max_bytes: int | None = None) -> None:
    """Count the gate's tokens in this process from now on (a pool process's initializer calls it) with
    `backend`, a `tokenizers.Tokenizer` (the model tokenizer's `backend_tokenizer`); None: do not count.
    Special tokens in a text count as text, as the planner's `count` (split_special_tokens) does. A raw
    text over `max_bytes` (pipeline.max_document_bytes) is not counted here."""
    global _tokenizer, _max_bytes
    if backend is not None:
        backend.encode_special_tokens = True
    _tokenizer, _max_bytes = backend, max_bytes


def _fits(text: str) -> bool:
    return _max_bytes is None or (len(text) if text.isascii() else len(text.encode())) <= _max_bytes


def prepare_many(texts: Sequence[str], sources: Sequence[str | None], kinds: Sequence[str | None],
                 o: PrepareOptions, windows: Sequence[bool] | None = None) -> list[Prepared]:
    """prepare() of each document; one that raises gets `error` (routed to the dead-letter topic by ingest).
    With a tokenizer (use_tokenizer), the documents with a digest prompt get the gate's counts, in one batch;
    but not a window (`windows`: which documents are windows) whose digest prompt the byte bound keeps
    (worker/digest/prompt.py `kept_by_bytes`): the planner keeps it without a count, so its raw text, the
    largest of the pass, is never tokenized."""
    out = []
    for text, source, kind in zip(texts, sources, kinds):
        try:
            out.append(prepare(text, source, kind, o))
        except Exception as exc:  # noqa: BLE001 - routed: ingest dead-letters this document with the reason
            out.append(Prepared(None, [], None, None, 0.0, f"{type(exc).__name__}: {exc}"))
    if _tokenizer is not None:
        gated = [i for i, p in enumerate(out) if p.prompt is not None and _fits(texts[i])
                 and not (windows and windows[i] and kept_by_bytes(p.text or texts[i], p.prompt, min_saving=o.min_saving))]
        if gated:
            t0 = time.process_time()  # the batch runs in the tokenizer's own threads too (a pool process runs one task)
            pairs = [t for i in gated for t in (out[i].text or texts[i], out[i].prompt)]
            enc = _tokenizer.encode_batch(pairs, add_special_tokens=False)
            share = (time.process_time() - t0) / len(gated)
            for j, i in enumerate(gated):
                out[i] = replace(out[i], raw_tokens=len(enc[2 * j].ids), prompt_tokens=len(enc[2 * j + 1].ids),
                                 seconds=out[i].seconds + share)
    return out
