"""What a document's generated ids become: the decode loop's looks (stop strings, a loop at the end)
and the finished `Generated` (EOS dropped, stop strings and loops cut).

    stopped_rows(eng, table, counts) -> bool [m]     which live rows are done by a stop or a loop
    finish_rows(eng, table, counts, stopped, prompt_tokens) -> list[Generated]
    finish(eng, ids, stopped, prompt_tokens, start) -> Generated   one document (`start`: its loop's)

`eng` is the Engine (its tokenizer, eos_ids and options are read at each call: tests and benchmarks
set them after loading). `table` is a host token table (int [m, W]; row i's ids are its first
counts[i] entries): a look reads every row of a round in one pass of array operations for the loop
finder (loops.loops_at_ends, loops.loop_starts), not a Python scan per row. Stop strings still
decode each live row's text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from worker.engine.loops import loop_starts, loops_at_ends


@dataclass(frozen=True)
class Generated:
    token_ids: list[int]  # generated ids, EOS excluded
    text: str
    finish_reason: Literal["eos", "stop", "length", "loop"]
    prompt_tokens: int


def looks(eng) -> bool:
    """Whether the decode loop looks at live rows' tokens (stop strings or the loop cut are on)."""
    return bool(eng.options.stop_strings) or eng.options.cut_loops


def stopped_rows(eng, table: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """bool [m]: rows that end in a loop (EngineOptions.cut_loops) or whose text holds a stop string."""
    counts = np.asarray(counts, dtype=np.int64)  # [m]
    hit = loops_at_ends(table, counts) if eng.options.cut_loops else np.zeros(len(counts), dtype=bool)  # [m]
    stops = eng.options.stop_strings
    if stops:
        for i in np.flatnonzero(~hit).tolist():
            text = eng.tokenizer.decode(table[i, : counts[i]].tolist(), skip_special_tokens=True)
            hit[i] = any(s in text for s in stops)
    return hit


def finish_rows(eng, table: np.ndarray, counts, stopped: list[bool], prompt_tokens: list[int]) -> list[Generated]:
    """Each row's Generated; the loop starts of all rows found at once (when the loop cut is on)."""
    counts = np.asarray(counts, dtype=np.int64)  # [m]
    starts = loop_starts(table, counts).tolist() if eng.options.cut_loops else [-1] * len(counts)
    rows = table.tolist()
    return [finish(eng, row[:n], s, p, None if start < 0 else start)
            for row, n, s, p, start in zip(rows, counts.tolist(), stopped, prompt_tokens, starts)]


def finish(eng, ids: list[int], stopped: bool, prompt_tokens: int, start: int | None) -> Generated:
    """One document's Generated; `start`: where its first loop starts (loops.loop_start), None: none."""
    ended = bool(ids) and ids[-1] in eng.eos_ids  # it ended by itself: no loop to cut (the gate still looks)
    if start is not None and eng.options.cut_loops and not ended:
        g = finish(eng, ids[:start], False, prompt_tokens, None)  # the stop strings still cut before the loop
        return g if g.finish_reason == "stop" else replace(g, finish_reason="loop")
    if ended:
        ids = ids[:-1]
        return Generated(ids, _text(eng, ids), "eos", prompt_tokens)
    text = _text(eng, ids)
    stops = eng.options.stop_strings
    if not stopped and stops:  # a stop in the last steps of a document that hit the length
        stopped = any(s in text for s in stops)
    if stopped:
        cut = min(text.index(s) for s in stops if s in text)
        keep = next(k for k in range(1, len(ids) + 1) if len(_text(eng, ids[:k])) >= cut)
        return Generated(ids[:keep], text[:cut], "stop", prompt_tokens)
    return Generated(ids, text, "length", prompt_tokens)


def _text(eng, ids: list[int]) -> str:
    return eng.tokenizer.decode(ids, skip_special_tokens=True) if eng.tokenizer is not None else ""
