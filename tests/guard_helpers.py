"""The generation guards in the packed decode: a run over documents, the bias that favours tokens, letters and n-grams."""

from __future__ import annotations

import torch



def _run(eng, docs: list[list[int]]):
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + len(d))
    staged = eng.stage(torch.tensor([t for d in docs for t in d], dtype=torch.int32), cu, max(map(len, docs)))
    return eng.generate(staged)


def _ngrams(ids: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]


DOCS = [[5, 6, 7, 8, 9, 10, 11], [40, 41], [12, 13, 14, 15, 16, 17, 18, 19, 20, 21], [3]]


def _favour(eng, tokens: list[int], by: float) -> None:
    """Add `by` to these tokens' logits: the model then mostly picks among them, so it loops."""
    with torch.no_grad():
        w = eng.lm_head.weight
        eng.lm_head.bias = torch.nn.Parameter(torch.zeros(eng.lm_head.out_features, device=w.device, dtype=w.dtype))
        eng.lm_head.bias[tokens] = by


def _letters(eng, k: int) -> list[int]:
    """k token ids whose text is letters only (digits and punctuation are exempt from repetition guards)."""
    return [i for i in range(100, len(eng.tokenizer)) if eng.tokenizer.decode([i]).strip().isalpha()][:k]
