"""A document's way on from its digest pass, on the ingest thread: digest mode finishes it at once; in
generative mode its rounds through the model are planned and registered: its first prompts, then the combine
rounds of a chunked document (its chunk summaries combined again, until one prompt holds them).

Contract:
- Owns (on the ingest thread): what follows a pass (`prepared`: a failed pass dead-lettered as
  `digest_error`, a passed document finished or planned), the registry's `add` of each round's sequences,
  and the taking side of the combine queue; finishing (worker/pipeline/finishing.py) puts a chunked
  document there, from its thread, once all of a round's summaries are in (`put`, the one call from another
  thread).
- May block: in planning (the tokenizer); on `finished` while finishing is full (digest mode); never on
  the GPU: `packer.submit_many` does not wait.
- Errors: a planned prompt over the budget dead-letters its document (`oversize`: a planner bug, not input);
  a combine round that does not shrink, or more than MAX_ROUNDS of them, dead-letters it
  (`chunking_diverged`); a planning exception dead-letters it as `internal_error` (worker/pipeline/guard.py).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from worker.pipeline.guard import Guard
from worker.pipeline.inflight import Doc
from worker.pipeline.planner import Planner, combine_text, prompt_texts
from worker.pipeline.stage import Shared

MAX_ROUNDS = 8  # combine rounds of a chunked document, at most (each must shrink it)

FinishedFn = Callable[[Doc, str], bool]  # Finishing.submit_finished: a document and its summary


@dataclass(frozen=True)
class Downstream:
    """Where ingest's documents go: the packer, planned by `planner` (generative mode), or `finished`
    with their digest's rendering (digest mode: packer and planner None)."""

    packer: object = None
    planner: Planner | None = None
    finished: FinishedFn | None = None


class Rounds:
    """Planned prompts → the registry's sequences → the packer (see the module contract)."""

    def __init__(self, shared: Shared, guard: Guard, downstream: Downstream, *, digest) -> None:
        """`digest`: the settings' `digest` group (the prompt's text)."""
        self.digest, self.finished = digest, downstream.finished
        self.tracker, self.registry, self.dead_letters = shared.tracker, shared.registry, shared.dead_letters
        self.metrics, self.guard, self.planner, self.packer = shared.metrics, guard, downstream.planner, downstream.packer
        self._q: queue.SimpleQueue[Doc] = queue.SimpleQueue()

    def put(self, doc: Doc) -> None:
        """A chunked document whose round's summaries are all in (`doc.parts`), from finishing's thread."""
        self._q.put(doc)

    def prepared(self, docs: list[Doc], preps: list) -> None:
        """A batch with its passes done: dead letters, token gate, plan, pack (or finish, in digest mode)."""
        good = self._passed(docs, preps)
        if not good:
            return
        if self.planner is None:  # digest mode: no model, the digest in English is the summary
            for doc in good:
                self.finished(doc, doc.prepared.summary)  # blocks while finishing is full: backpressure
            return
        self._first(good)

    def _passed(self, docs: list[Doc], preps: list) -> list[Doc]:
        """The documents whose pass worked (each with its `prepared`); the others are dead-lettered
        (`digest_error`)."""
        self.metrics.digest_seconds.inc(sum(p.seconds for p in preps))
        ok: list[Doc] = []
        for doc, prep in zip(docs, preps):
            if prep.error is not None:
                self.dead_letters.doc(doc, "digest_error", prep.error)
                continue
            doc.take(prep)  # the redacted text replaces the document's (worker/redaction/)
            ok.append(doc)
        return ok

    def _first(self, docs: list[Doc]) -> None:
        """A batch of prepared documents planned, registered and handed to the packer together."""
        batch: list[tuple[int, np.ndarray, int]] = []
        for doc, plan in self.guard.each(docs, self._plan, "plan"):
            try:
                batch.extend(self._register(doc, plan))
            except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard
                self.guard.doc("register", doc, exc)
        now = time.monotonic()  # stamped first: a bin may take them before submit_many returns
        for doc in docs:
            doc.packed = now
        self.packer.submit_many(batch)  # one arrival for the window: the poll's batch packs together

    def _plan(self, docs: list[Doc]) -> list:
        """Each document's plan (prompts, chunks), from the text its prompt is made from."""
        return self.planner.plan_many(prompt_texts(docs, self.digest, self.planner.count, self.metrics))

    def _register(self, doc: Doc, plan) -> list[tuple[int, np.ndarray, int]]:
        """A document's first round: its token counts noted, its plan's sequences registered."""
        doc.input_tokens, doc.truncated, doc.chunks = plan.document_tokens, plan.truncated, len(plan.prompts)
        if doc.document_tokens is not None:  # None: a window kept compacted by its bytes, not counted
            doc.document_tokens = doc.document_tokens or plan.document_tokens
            self.metrics.document_tokens.inc(doc.document_tokens)
        return self._sequences(doc, plan)

    def _sequences(self, doc: Doc, plan) -> list[tuple[int, np.ndarray, int]]:
        """Register the plan's sequences; returns (seq_id, tokens, key) to submit."""
        limit = self.planner.max_prompt_tokens
        if any(len(p) > limit for p in plan.prompts):  # the planner keeps prompts in budget: a bug, not input
            self.dead_letters.doc(doc, "oversize", f"a planned prompt exceeds {limit} tokens")
            return []
        out = []
        for sid, seq, prompt in self.registry.add(doc, list(plan.prompts), final=len(plan.prompts) == 1):
            seq.tokens = np.asarray(prompt, dtype=np.int32)  # [n] int32
            out.append((sid, seq.tokens, doc.epoch))
        return out

    def combine(self) -> None:
        """Every queued chunked document's next round, planned and handed to the packer."""
        while True:
            try:
                doc = self._q.get_nowait()
            except queue.Empty:
                return
            if self.tracker.epoch(doc.tp) != doc.epoch:
                continue  # revoked meanwhile
            parts = [doc.parts[i] for i in sorted(doc.parts)]
            try:
                plan = self.planner.plan(combine_text(parts))
            except Exception as exc:  # noqa: BLE001 - routed: the last-resort guard
                self.guard.doc("combine", doc, exc)
                continue
            doc.rounds += 1
            if doc.rounds > MAX_ROUNDS or len(plan.prompts) >= len(parts):
                self.dead_letters.doc(doc, "chunking_diverged",
                                      f"{len(parts)} chunk summaries did not combine within {doc.rounds} rounds")
                continue
            self.packer.submit_many(self._sequences(doc, plan))
