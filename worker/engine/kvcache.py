"""The packed KV buffer: one slot per document, laid out by the packer's weights.

A bin's weight is sum(prompt + reserve) tokens; document i owns rows
[start_i, start_i + prompt_i + reserve) of every layer's K and V, so a slot never needs to move
and decode never pads a cache to the longest. One extra scratch row takes the writes of padding
rows in fixed-size (CUDA-graph) decode batches. The pool also holds the generated-token table.

Every layer's K and V read as [rows + 1, Hkv, D]. `layout` is how they are stored: "token" (that
shape, contiguous: a row's heads side by side) or "head" ([Hkv, rows + 1, D] storage behind the
same view: one KV head's rows contiguous, so a decode program streams its document's rows as one
run of memory instead of 2 * D bytes out of every Hkv * 2 * D). Writers and readers go through the
view's strides, so the layout changes no value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def slot_starts(lengths: list[int], reserve: int) -> list[int]:
    """First KV row of each document's slot: [n]."""
    starts, row = [], 0
    for n in lengths:
        starts.append(row)
        row += n + reserve
    return starts


@dataclass
class KVPool:
    layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    device: torch.device
    max_new: int
    rows: int = 0  # usable rows; row `rows` is the scratch row
    docs: int = 0  # document capacity of the token table; row `docs` is a dummy
    generation: int = 0  # bumped on every reallocation (invalidates captured graphs)
    k: list[torch.Tensor] = field(default_factory=list)  # per layer [rows + 1, Hkv, D]
    v: list[torch.Tensor] = field(default_factory=list)  # per layer [rows + 1, Hkv, D]
    out_tokens: torch.Tensor | None = None  # int64 [docs + 1, max_new]
    out_len: torch.Tensor | None = None  # int64 [docs + 1]
    layout: str = field(default="token", init=False)  # "token" | "head": K/V storage order (module docstring)

    @property
    def bytes_per_row(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * torch.finfo(self.dtype).bits // 8

    def ensure(self, rows: int, docs: int) -> None:
        """Grow (never shrink) to hold `rows` KV rows and `docs` documents."""
        if rows > self.rows:
            self.k, self.v = [], []  # free before allocating the larger buffers
            new_rows = max(rows, self.rows + self.rows // 4)
            self.k = [self._buffer(new_rows + 1) for _ in range(self.layers)]
            self.v = [self._buffer(new_rows + 1) for _ in range(self.layers)]
            self.rows = new_rows
            self.generation += 1
        if docs > self.docs or self.out_tokens is None:
            new_docs = max(docs, 2 * self.docs, 8)
            self.out_tokens = torch.zeros(new_docs + 1, self.max_new, dtype=torch.int64, device=self.device)
            self.out_len = torch.zeros(new_docs + 1, dtype=torch.int64, device=self.device)
            self.docs = new_docs
            self.generation += 1

    def _buffer(self, rows: int) -> torch.Tensor:
        """[rows, Hkv, D], stored in self.layout's order."""
        if self.layout == "head":
            store = torch.empty(self.kv_heads, rows, self.head_dim, dtype=self.dtype, device=self.device)
            return store.permute(1, 0, 2)  # [rows, Hkv, D] view
        return torch.empty(rows, self.kv_heads, self.head_dim, dtype=self.dtype, device=self.device)

    @property
    def scratch_row(self) -> int:
        return self.rows

    @property
    def dummy_doc(self) -> int:
        return self.docs

    def release(self) -> None:
        """Drop every buffer (autotune, OOM recovery)."""
        self.k, self.v = [], []
        self.out_tokens = self.out_len = None
        self.rows = self.docs = 0
        self.generation += 1
