"""Tokenization in bounded pieces: no tokenizer call takes more than `max_bytes` of text.

A fast tokenizer's working set grows with the text of one call (ids, offsets, tokens: hundreds
of bytes per token), so a 4 MB document tokenized whole takes over a gigabyte. Here a text longer
than `max_bytes` (UTF-8) is cut after newlines into slices of at most that size (a longer line is
cut inside) and counted slice by slice, and a batch of texts is tokenized in groups of at most
`max_bytes` in all. A sum of slice counts can differ from the whole text's count by a token or so
per cut (a token that spans the newline); counts are used for gating and chunking, which allow it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

CountFn = Callable[[Sequence[str]], list[int]]


def nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def slices(text: str, max_bytes: int) -> list[str]:
    """`text` cut after newlines into pieces of at most `max_bytes` bytes; "".join gives `text` back."""
    if max_bytes < 4:
        raise ValueError(f"max_bytes must be >= 4, got {max_bytes}")
    if len(text) * 4 <= max_bytes or nbytes(text) <= max_bytes:
        return [text]
    lines = text.split("\n")
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        piece = line + "\n" if i < len(lines) - 1 else line
        n = nbytes(piece)
        if cur and size + n > max_bytes:
            out.append("".join(cur))
            cur, size = [], 0
        if n > max_bytes:  # one line longer than a slice: cut it by characters (4 bytes each at most)
            step = max_bytes // 4
            out.extend(piece[j:j + step] for j in range(0, len(piece), step))
            continue
        cur.append(piece)
        size += n
    if cur:
        out.append("".join(cur))
    return [s for s in out if s] or [text[:0]]


def groups(texts: Sequence[str], max_bytes: int) -> Iterator[range]:
    """Consecutive index ranges of `texts` of at most `max_bytes` in all (a longer text alone)."""
    start, size = 0, 0
    for i, t in enumerate(texts):
        n = nbytes(t)
        if i > start and size + n > max_bytes:
            yield range(start, i)
            start, size = i, 0
        size += n
    if start < len(texts):
        yield range(start, len(texts))


def bounded_count(count: CountFn, max_bytes: int) -> CountFn:
    """`count`, called on at most `max_bytes` of text at a time; a long text's count is its slices' sum."""

    def run(texts: Sequence[str]) -> list[int]:
        pieces: list[str] = []
        owner: list[int] = []
        for i, t in enumerate(texts):
            for s in slices(t, max_bytes):
                pieces.append(s)
                owner.append(i)
        totals = [0] * len(texts)
        for g in groups(pieces, max_bytes):
            for j, n in zip(g, count([pieces[j] for j in g])):
                totals[owner[j]] += n
        return totals

    return run
