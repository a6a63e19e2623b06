"""Packed prefill: one forward over a ribbon of documents, logits only at each document's end.

Positions restart at 0 for every document; attention is causal within each document (the
backend reads cu_seqlens). Large bins run in chunks of whole documents so activation memory is
bounded by `chunk_tokens` while every document's K/V lands in its slot of the KV pool.
"""

from __future__ import annotations

import torch

from worker.engine.attention import AttnContext


def chunk_documents(lengths: list[int], chunk_tokens: int) -> list[tuple[int, int]]:
    """Split documents [0, n) into consecutive runs of at most chunk_tokens (a longer document runs alone)."""
    runs, first, acc = [], 0, 0
    for i, n in enumerate(lengths):
        if acc and acc + n > chunk_tokens:
            runs.append((first, i))
            first, acc = i, 0
        acc += n
    if lengths:
        runs.append((first, len(lengths)))
    return runs


def no_mask_marker(device: torch.device) -> torch.Tensor:
    """A 4D tensor: transformers' mask builders return a 4D mask as-is, so none is built (and no host
    sync happens inside a CUDA graph); our attention functions ignore it."""
    return torch.ones(1, 1, 1, 1, dtype=torch.bool, device=device)


def forward_hidden(base, ids: torch.Tensor, pos: torch.Tensor, ctx: AttnContext, marker: torch.Tensor) -> torch.Tensor:
    """ids, pos: int64 [T] -> last hidden states [T, hidden]."""
    out = base(input_ids=ids[None], position_ids=pos[None], attention_mask=marker, use_cache=False, ribbon=ctx)
    return out.last_hidden_state[0]


def prefill_logits(
    base,
    lm_head,
    tokens: torch.Tensor,
    cu_host: list[int],
    chunk_tokens: int,
    marker: torch.Tensor,
    pool=None,
    starts: list[int] | None = None,
    prefill_kernel: str = "fa2",
) -> torch.Tensor:
    """tokens: int64 [T>=cu[-1]] on the model's device -> float32 last-position logits [n, V].

    With `pool` and `starts`, each document's K/V is written to rows starts[i] + position.
    """
    device = tokens.device
    lengths = [b - a for a, b in zip(cu_host[:-1], cu_host[1:])]
    outs = []
    for first, last in chunk_documents(lengths, chunk_tokens):
        a, b = cu_host[first], cu_host[last]
        cu_chunk = [c - a for c in cu_host[first : last + 1]]
        lens = torch.tensor(lengths[first:last], dtype=torch.int64)  # [m]
        doc = torch.repeat_interleave(torch.arange(last - first), lens).to(device, non_blocking=True)  # [T]
        cu_dev = torch.tensor(cu_chunk, dtype=torch.int32).to(device, non_blocking=True)  # [m+1]
        pos = torch.arange(b - a, device=device) - cu_dev.long()[doc]  # [T] restarts at 0 per document
        rows = None
        if pool is not None and starts is not None:
            st = torch.tensor(starts[first:last], dtype=torch.int64).to(device, non_blocking=True)  # [m]
            rows = st[doc] + pos  # [T]
        ctx = AttnContext(
            mode="prefill",
            k_cache=pool.k if rows is not None else None,
            v_cache=pool.v if rows is not None else None,
            cu_seqlens=cu_dev,
            cu_host=cu_chunk,
            max_seqlen=max(lengths[first:last]),
            rows=rows,
            prefill_kernel=prefill_kernel,
        )
        hidden = forward_hidden(base, tokens[a:b], pos, ctx, marker)  # [T, hidden]
        last_idx = cu_dev[1:].long() - 1  # [m]
        outs.append(lm_head(hidden[last_idx]).float())  # [m, V]
    return torch.cat(outs, dim=0)  # [n, V]
