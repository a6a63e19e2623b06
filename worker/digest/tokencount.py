"""Token counts made in the preprocessing pass: the raw document's and its digest prompt's.

The compaction gate (worker/digest/prompt.py, `token_gate`) keeps a digest prompt only if it has
fewer tokens than the raw document, so both are counted. On the ingest thread that count was the
largest share of its time (py-spy on a steady CPU run: 43%, against 7% for tokenizing the prompts),
and every document waited behind it. It now runs with the rest of each document's pass, in the
preprocessing pool's processes when there are any (worker/service/preprocess.py).

The counter is the model's own fast tokenizer, rebuilt from its JSON by the `tokenizers` library
(so a pool process loads it in a fraction of a second and never imports transformers or torch),
with special-token parsing off as the planner's `split_special_tokens=True` has it: its counts are
the planner's (tests/test_preprocess.py compares them).
"""

from __future__ import annotations

from collections.abc import Sequence


class TokenCounter:
    """Counts tokens as the planner does (no special tokens added, none parsed from the text)."""

    def __init__(self, tokenizer_json: str) -> None:
        self._json, self._tok = tokenizer_json, None  # built at the first count

    def __call__(self, texts: Sequence[str]) -> list[int]:
        if self._tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self._json)
            tok.no_truncation()
            tok.no_padding()
            tok.encode_special_tokens = True
            self._tok = tok
        return [len(e) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


def tokenizer_json(hf_tokenizer) -> str | None:
    """The JSON of a transformers fast tokenizer's backend; None for a slow one (ingest then counts)."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    return backend.to_str() if backend is not None else None
