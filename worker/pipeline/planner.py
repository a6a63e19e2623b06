"""Turn a document into sequences that fit a bin: whole, truncated, or in chunks.

Owned by the ingest thread (it holds its own tokenizer). A document whose
prompt fits `max_prompt_tokens` goes as one sequence. A longer one is cut
into chunks of whole lines (a line longer than a chunk is split inside), each
summarized; the chunk summaries are then summarized together (DESIGN.md
section 6). With `truncate` set, it is cut to fit instead, and marked so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.digest.prompt import DocumentText, gate_counted, kept_by_bytes, token_gate
from worker.pipeline.slices import bounded_count, groups, nbytes, slices

PromptFn = Callable[[str], list[int]]                    # document -> prompt token ids
BatchPromptFn = Callable[[list[str]], list[list[int]]]   # documents -> prompt token ids (one call)
CountFn = Callable[[Sequence[str]], list[int]]           # texts -> token counts (batched)


@dataclass(frozen=True)
class Plan:
    prompts: tuple[tuple[int, ...], ...]  # one prompt per sequence, in chunk order
    document_tokens: int                  # tokens of the document alone
    truncated: bool = False


@dataclass(frozen=True)
class PlanLimits:
    max_prompt_tokens: int               # a sequence's prompt at most (the budget less the reserve)
    max_input_tokens: int | None = None  # a chunk's document tokens at most (generation.max_input_tokens)
    truncate: bool = False               # cut a long document to fit instead of chunking it
    max_new_tokens: int = 0              # a summary's tokens (a chunk must hold two)
    max_text_bytes: int | None = None    # pipeline.max_document_bytes: no tokenizer call takes more text


def model_limits(budget_prompt: int, max_input_tokens: int | None, max_positions: int | None,
                 max_new_tokens: int) -> tuple[int, int | None]:
    """(max_prompt_tokens, max_input_tokens) inside the model's context: a prompt and its summary fit the
    model's positions (`max_position_embeddings`), so a prompt holds at most positions - max_new_tokens
    tokens, and max_input_tokens (generation.max_input_tokens) defaults to that. `budget_prompt`: the bin's
    budget less a summary's reserve."""
    if not max_positions:
        return budget_prompt, max_input_tokens
    inside = max_positions - max_new_tokens
    return min(budget_prompt, inside), min(max_input_tokens or inside, inside)


class Planner:
    def __init__(self, prompt: PromptFn, count: CountFn, limits: PlanLimits,
                 prompt_batch: BatchPromptFn | None = None, tokenizer=None):
        """`limits.max_text_bytes`: a longer document is counted by slices and chunked without being
        tokenized whole (worker/pipeline/slices.py). `tokenizer`: the one `count` uses (a Hugging Face
        tokenizer), for the preprocessing pool to count the compaction gate with (None: only here)."""
        self.tokenizer = tokenizer
        max_prompt_tokens, max_input_tokens = limits.max_prompt_tokens, limits.max_input_tokens
        truncate, max_new_tokens, max_text_bytes = limits.truncate, limits.max_new_tokens, limits.max_text_bytes
        self.max_text_bytes = max_text_bytes
        if max_text_bytes is not None:
            count = bounded_count(count, max_text_bytes)
        overhead = len(prompt(""))
        if max_prompt_tokens <= overhead + 8:
            raise ValueError(f"a bin holds {max_prompt_tokens} prompt tokens, the prompt alone takes "
                             f"{overhead}: raise batching.token_budget or lower generation.max_new_tokens")
        self.prompt, self.count = prompt, count
        self.prompt_batch = prompt_batch or (lambda texts: [prompt(t) for t in texts])
        self.max_prompt_tokens = max_prompt_tokens
        self.overhead = overhead
        limit = max_prompt_tokens - overhead
        self.chunk_tokens = min(limit, max_input_tokens) if max_input_tokens else limit
        self.truncate = truncate
        # A chunk must hold two chunk summaries (and their "[part i/n]" tags), or combining
        # summaries would never shrink: a chunked document would go round forever.
        part = max_new_tokens + count(["[part 99/99] "])[0] + 1
        if not truncate and self.chunk_tokens < 2 * part:
            raise ValueError(f"chunks of {self.chunk_tokens} document tokens cannot combine summaries of "
                             f"{max_new_tokens} tokens: raise generation.max_input_tokens (or batching.token_budget) "
                             f"to at least {2 * part}, or lower generation.max_new_tokens")

    def plan_many(self, texts: list[str]) -> list[Plan]:
        """Plans for many documents, tokenized in one batch, or in groups of at most max_text_bytes (chunking,
        rarely needed, goes one by one; a document longer than max_text_bytes is never tokenized whole)."""
        if self.max_text_bytes is None:
            return [self._plan(t, ids) for t, ids in zip(texts, self.prompt_batch(texts))]
        plans: list[Plan | None] = [None] * len(texts)
        short = [i for i, t in enumerate(texts) if not self._long(t)]
        for g in groups([texts[i] for i in short], self.max_text_bytes):
            idx = [short[k] for k in g]
            for i, ids in zip(idx, self.prompt_batch([texts[i] for i in idx])):
                plans[i] = self._plan(texts[i], ids)
        return [p if p is not None else self._plan_long(t) for p, t in zip(plans, texts)]

    def plan(self, text: str) -> Plan:
        return self._plan_long(text) if self._long(text) else self._plan(text, self.prompt(text))

    def _long(self, text: str) -> bool:
        return self.max_text_bytes is not None and nbytes(text) > self.max_text_bytes

    def _plan_long(self, text: str) -> Plan:
        """A document longer than max_text_bytes: counted by slices, then chunked (or truncated within its
        first max_text_bytes)."""
        n_doc = self.count([text])[0]
        if self.truncate:
            head = slices(text, self.max_text_bytes)[0]
            return Plan((tuple(self._truncated(head)),), n_doc, truncated=True)
        return Plan(tuple(tuple(p) for p in self._chunks(text)), n_doc)

    def _plan(self, text: str, ids: list[int]) -> Plan:
        n_doc = max(0, len(ids) - self.overhead)
        if len(ids) <= self.max_prompt_tokens and n_doc <= self.chunk_tokens:
            return Plan((tuple(ids),), n_doc)
        if self.truncate:
            return Plan((tuple(self._truncated(text)),), n_doc, truncated=True)
        return Plan(tuple(tuple(p) for p in self._chunks(text)), n_doc)

    def _fits(self, ids: list[int]) -> bool:
        return len(ids) <= self.max_prompt_tokens and len(ids) - self.overhead <= self.chunk_tokens

    def _truncated(self, text: str) -> list[int]:
        lo, hi = 0, len(text)  # longest prefix (in characters) whose prompt fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits(self.prompt(text[:mid])):
                lo = mid
            else:
                hi = mid - 1
        return self.prompt(text[:lo])

    def _chunks(self, text: str) -> list[list[int]]:
        pieces = self._pieces(text.split("\n"))
        counts = self.count(pieces)
        out: list[list[int]] = []
        cur: list[str] = []
        cur_n = 0
        for piece, n in zip(pieces, counts):
            if cur and cur_n + n + 1 > self.chunk_tokens:
                out.extend(self._fit("\n".join(cur)))
                cur, cur_n = [], 0
            cur.append(piece)
            cur_n += n + 1
        if cur:
            out.extend(self._fit("\n".join(cur)))
        return out

    def _pieces(self, lines: list[str]) -> list[str]:
        """Lines, with any line longer than a chunk split into chunk-sized parts."""
        counts = self.count(lines)
        out: list[str] = []
        for line, n in zip(lines, counts):
            if n < self.chunk_tokens:
                out.append(line)
                continue
            parts = -(-n * 2 // self.chunk_tokens)  # aim at half a chunk per part
            step = max(1, -(-len(line) // parts))
            out.extend(line[i:i + step] for i in range(0, len(line), step))
        return out

    def _fit(self, chunk: str) -> list[list[int]]:
        """The chunk's prompt, halved until it fits (token counts of joined lines can differ)."""
        ids = self.prompt(chunk)
        if self._fits(ids) or len(chunk) <= 1:
            return [ids]
        mid = len(chunk) // 2
        cut = chunk.rfind("\n", 0, mid)
        cut = cut if cut > 0 else mid
        return self._fit(chunk[:cut]) + self._fit(chunk[cut:].lstrip("\n"))


def engine_planner(engine, settings, budget_prompt: int, reserve: int) -> Planner:
    """The worker's planner over `engine` (worker.pipeline.stage.EngineLike): its prompt framing and
    tokenizer, prompts inside the model's positions (model_limits), a bin's `budget_prompt` tokens at
    most. The ingest thread shares the engine's tokenizer: encode and decode take it read-only (no call
    changes truncation or padding state, the one way fast tokenizers fail across threads)."""
    tok = engine.tokenizer
    m = settings.generation
    max_prompt, max_input = model_limits(budget_prompt, m.max_input_tokens, getattr(engine, "max_positions", None),
                                         m.max_new_tokens)
    limits = PlanLimits(max_prompt_tokens=max_prompt, max_input_tokens=max_input, truncate=m.truncate,
                        max_new_tokens=reserve, max_text_bytes=settings.pipeline.max_document_bytes)

    def count(texts: Sequence[str]) -> list[int]:
        return [len(x) for x in tok(list(texts), add_special_tokens=False, split_special_tokens=True)["input_ids"]]

    return Planner(engine.prompt_ids, count, limits, prompt_batch=engine.prompt_ids_batch, tokenizer=tok)


def combine_text(parts: Sequence[str]) -> str:
    """The document the chunk summaries are summarized from."""
    n = len(parts)
    return "\n".join(f"[part {i + 1}/{n}] {p.strip()}" for i, p in enumerate(parts))


def prompt_texts(docs: Sequence, digest, count: CountFn, metrics) -> list[str]:
    """The text each document's prompt is made from: its digest prompt or its raw text (the gate of
    compaction, `digest` the digest.* settings). Sets each document's `document_tokens` when it compacts.

    A window (a document assembled from many line records) whose digest prompt passes `kept_by_bytes` keeps
    it without a token count: its raw text, the largest text of the pass, is never tokenized, and its
    `document_tokens` is None (not counted). Every other digest prompt passes the token gate: on the counts
    the preprocessing pool made (`Prepared.raw_tokens`, `prompt_tokens`) where it made them, else the raw
    and the compacted texts counted here in one batch with `count`."""
    texts = [d.text for d in docs]
    if not digest.compaction:
        return texts
    chosen = [DocumentText(d.prepared.prompt, True, 0, 0) if d.prepared.prompt is not None
              else DocumentText(d.text, False, 0, 0) for d in docs]
    by_bytes = [d.window is not None and c.compacted and kept_by_bytes(d.text, c.text, min_saving=digest.min_saving)
                for d, c in zip(docs, chosen)]
    # Counts made in the preprocessing pool (worker/digest/prepared.py) decide there; the rest are counted
    # here. Counting the raw documents' tokens is work the planner does anyway without compaction.
    counted = []
    for i, (doc, b) in enumerate(zip(docs, by_bytes)):
        if b:
            continue
        p = doc.prepared
        if chosen[i].compacted and p.raw_tokens is not None:
            chosen[i] = gate_counted(texts[i], p.prompt, p.raw_tokens, p.prompt_tokens, min_saving=digest.min_saving)
        else:
            counted.append(i)
    gated = token_gate([texts[i] for i in counted], [chosen[i] for i in counted], min_saving=digest.min_saving,
                       count=count)
    for i, c in zip(counted, gated):
        chosen[i] = c
    for doc, c, b in zip(docs, chosen, by_bytes):
        doc.document_tokens = None if b else c.raw_tokens
        metrics.compacted.inc(c.compacted)
    return [c.text for c in chosen]
