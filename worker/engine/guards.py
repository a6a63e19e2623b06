"""Generation guards: pure tensor functions on one decode step's logits, row by row.

Each row of a step is one document; a row's guards read only that document's own generated
tokens (its row of the KV pool's token table), so documents of one bin never affect each other.
Nothing here syncs with the host or changes shape with the data: the functions run inside a
captured CUDA graph as they run eagerly on a CPU.

    apply_guards(logits, guards, history, length, eos) -> logits
        logits:  float [B, V]  the step's scores
        history: int64 [B, L]  each row's generated tokens so far (only the first length[b] count)
        length:  int64 [B]     tokens generated so far per row
        eos:     int64 [E]     end-of-sequence ids

Guards (GuardConfig; all off by default):
- repetition_penalty p > 1: a token the document has already generated gets its score divided
  by p when positive, multiplied by p when negative (the CTRL rule). Only generated tokens
  count, never the prompt: copying an identifier from the document is what a summary should do.
- no_repeat_ngram n >= 2: a token that would complete an n-gram the document already generated
  is blocked (score -inf), which ends loops such as "was reported to the ... was reported to".
Both see every token, with letters or not: "[1] [1] [1]" and ":00:00:00" are loops as much as
words are. A summary that cites an identifier twice pays the penalty on its second citation.
- min_new_tokens m: end-of-sequence ids are blocked while a document has fewer than m tokens.
The maximum length (max_new_tokens) and stop strings are applied by the decode loop; so is the
loop finder (worker/engine/loops.py): an output that loops anyway ends there, its text cut where
the loop starts (finish reason "loop"), and the publish gate judges what is left.
Written here, not taken from transformers' LogitsProcessors, because those read a padded
[B, S] batch of input ids with one length for all rows, not a packed table with a length per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GuardConfig:
    repetition_penalty: float = 1.0
    no_repeat_ngram: int = 0
    min_new_tokens: int = 0

    def __post_init__(self) -> None:
        if self.repetition_penalty < 1.0:
            raise ValueError(f"repetition_penalty={self.repetition_penalty!r} must be >= 1.0")
        if self.no_repeat_ngram < 0 or self.no_repeat_ngram == 1:
            raise ValueError(f"no_repeat_ngram={self.no_repeat_ngram!r} must be 0 (off) or >= 2")
        if self.min_new_tokens < 0:
            raise ValueError(f"min_new_tokens={self.min_new_tokens!r} must be >= 0")

    @property
    def active(self) -> bool:
        return self.repetition_penalty > 1.0 or self.no_repeat_ngram >= 2 or self.min_new_tokens > 0


def _seen(history: torch.Tensor, length: torch.Tensor, vocab: int) -> torch.Tensor:
    """bool [B, V]: which tokens each row has generated."""
    pos = torch.arange(history.shape[1], device=history.device)  # [L]
    idx = torch.where(pos[None, :] < length[:, None], history, vocab)  # [B, L]; vocab = nothing
    seen = torch.zeros(history.shape[0], vocab + 1, dtype=torch.bool, device=history.device)  # [B, V+1]
    return seen.scatter_(1, idx, True)[:, :vocab]


def penalize_repeats(logits: torch.Tensor, history: torch.Tensor, length: torch.Tensor, penalty: float) -> torch.Tensor:
    """logits [B, V] with the CTRL repetition penalty on each row's generated tokens."""
    seen = _seen(history, length, logits.shape[-1])  # [B, V]
    penalized = torch.where(logits > 0, logits / penalty, logits * penalty)  # [B, V]
    return torch.where(seen, penalized, logits)


def block_ngrams(logits: torch.Tensor, history: torch.Tensor, length: torch.Tensor, n: int) -> torch.Tensor:
    """logits [B, V] with -inf on every token that would repeat an n-gram of the row's own tokens."""
    b, width = history.shape
    vocab = logits.shape[-1]
    if width < n:
        return logits
    windows = history.unfold(1, n, 1)  # [B, W, n], W = L - n + 1
    j = torch.arange(windows.shape[1], device=history.device)  # [W]
    complete = (j[None, :] + n - 1) < length[:, None]  # [B, W]: the whole n-gram was generated
    tail_pos = (length[:, None] - (n - 1) + torch.arange(n - 1, device=history.device)[None, :]).clamp(0, width - 1)
    tail = history.gather(1, tail_pos)  # [B, n-1]: the row's last n-1 tokens
    match = (windows[..., : n - 1] == tail[:, None, :]).all(dim=-1) & complete  # [B, W]
    idx = torch.where(match, windows[..., n - 1], vocab)  # [B, W]
    banned = torch.zeros(b, vocab + 1, dtype=torch.bool, device=history.device).scatter_(1, idx, True)[:, :vocab]
    return logits.masked_fill(banned, float("-inf"))


def hold_eos(logits: torch.Tensor, length: torch.Tensor, min_new: int, eos: torch.Tensor) -> torch.Tensor:
    """logits [B, V] with -inf on the EOS ids of rows that have generated fewer than min_new tokens."""
    if eos.numel() == 0:
        return logits
    short = length < min_new  # [B]
    is_eos = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device).index_fill_(0, eos, True)  # [V]
    return logits.masked_fill(short[:, None] & is_eos[None, :], float("-inf"))


def apply_guards(logits: torch.Tensor, guards: GuardConfig | None, history: torch.Tensor, length: torch.Tensor,
                 eos: torch.Tensor) -> torch.Tensor:
    """Every active guard on one step's logits (see the module docstring for shapes)."""
    if guards is None or not guards.active:
        return logits
    if guards.repetition_penalty > 1.0:
        logits = penalize_repeats(logits, history, length, guards.repetition_penalty)
    if guards.no_repeat_ngram >= 2:
        logits = block_ngrams(logits, history, length, guards.no_repeat_ngram)
    if guards.min_new_tokens > 0:
        logits = hold_eos(logits, length, guards.min_new_tokens, eos)
    return logits
