"""Prompt token ids in the preprocessing pool: each text tokenized once, next to its digest pass.

    Framer(prompt_batch, overhead)          texts -> framed prompt ids (the planner's, or from a TokenSpec)
    TokenSpec(tokenizer, local, head, tail)  picklable: what a pool process needs to build the same Framer
    choose_ids(raws, preps, framer, min_saving) -> preps with `raw_tokens` and `ids` set

Per document, one batch call tokenizes the raw text and, when the character gate passed, the digest
prompt; the digest prompt is kept only if it has at most (1 - min_saving) of the raw document's tokens
(the token gate: the model never gets more tokens than the raw document would give it), and `ids`
are the framed prompt of the text kept (head + document + tail, as the engine's prompt_ids_batch), an
int32 array that pickles cheaply. The ingest thread builds each Plan from them without tokenizing again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from worker.digest.prepared import Prepared

BatchPromptFn = Callable[[list[str]], list[list[int]]]  # documents -> framed prompt ids (one call)


class Framer:
    """Framed prompt ids of many texts in one call; `overhead` is the frame's length (head + tail)."""

    def __init__(self, prompt_batch: BatchPromptFn, overhead: int) -> None:
        self.prompt_batch, self.overhead = prompt_batch, overhead

    def ids(self, texts: list[str]) -> list[np.ndarray]:
        return [np.asarray(x, dtype=np.int32) for x in self.prompt_batch(texts)]  # each [n] int32


@dataclass(frozen=True)
class TokenSpec:
    """The planner's tokenizer and prompt frame, for a pool process to load once (picklable)."""

    tokenizer: str             # the tokenizer's folder (model.path resolved) or hub id
    local_files_only: bool     # model.local_files_only
    head: tuple[int, ...]      # prompt ids before the document (chat template, instruction)
    tail: tuple[int, ...]      # prompt ids after it

    def framer(self) -> Framer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self.tokenizer, local_files_only=self.local_files_only)
        head, tail = list(self.head), list(self.tail)

        def prompt_batch(texts: list[str]) -> list[list[int]]:
            # as Engine.prompt_ids_batch: the document is text, special-token parsing off
            docs = tok(list(texts), add_special_tokens=False, split_special_tokens=True)["input_ids"]
            return [head + d + tail for d in docs]

        return Framer(prompt_batch, len(head) + len(tail))


def token_spec(engine, local_files_only: bool) -> TokenSpec | None:
    """The spec of an engine's tokenizer and frame (Engine or EngineProcess); None when it has none
    (a pool process then leaves the token work to the ingest thread)."""
    source = getattr(getattr(engine, "tokenizer", None), "name_or_path", "")
    frame = getattr(engine, "prompt_frame", None)
    if not source or frame is None:
        return None
    head, tail = frame()
    return TokenSpec(str(source), local_files_only, tuple(head), tuple(tail))


def choose_ids(raws: Sequence[str], preps: list[Prepared], framer: Framer, min_saving: float) -> list[Prepared]:
    """Each pass with its raw token count and the framed ids of the text the model gets (the digest
    prompt when it passes the token gate, else the raw text; a refused prompt becomes None). Passes
    that failed are left as they are. A tokenizer that raises fails its documents alone (`error`)."""
    todo = [i for i, p in enumerate(preps) if p.error is None]
    texts = [raws[i] for i in todo] + [preps[i].prompt for i in todo if preps[i].prompt is not None]
    try:
        ids = framer.ids(texts)
    except Exception:  # noqa: BLE001 - retried one document at a time below: only the bad one fails
        return [_choose_alone(r, p, framer, min_saving) for r, p in zip(raws, preps)]
    out = list(preps)
    k = len(todo)  # the digest prompts' ids follow the raw texts'
    for j, i in enumerate(todo):
        prompt_ids = None
        if preps[i].prompt is not None:
            prompt_ids, k = ids[k], k + 1
        out[i] = _gated(preps[i], ids[j], prompt_ids, framer.overhead, min_saving)
    return out


def _gated(p: Prepared, raw_ids: np.ndarray, prompt_ids: np.ndarray | None, overhead: int,
           min_saving: float) -> Prepared:
    raw_n = len(raw_ids) - overhead
    if prompt_ids is not None and len(prompt_ids) - overhead <= (1.0 - min_saving) * raw_n:
        return dataclasses.replace(p, ids=prompt_ids, raw_tokens=raw_n)
    return dataclasses.replace(p, prompt=None, ids=raw_ids, raw_tokens=raw_n)


def _choose_alone(raw: str, p: Prepared, framer: Framer, min_saving: float) -> Prepared:
    if p.error is not None:
        return p
    try:
        ids = framer.ids([raw] if p.prompt is None else [raw, p.prompt])
        return _gated(p, ids[0], ids[1] if len(ids) > 1 else None, framer.overhead, min_saving)
    except Exception as exc:  # noqa: BLE001 - routed: ingest dead-letters this document with the reason
        return dataclasses.replace(p, error=f"tokenizer: {type(exc).__name__}: {exc}")

