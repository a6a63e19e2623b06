"""The document text given to the model: a few digest lines, then the compacted text.

The instruction is added by the engine (model.instruction, chat template); the
whole prompt is tokenized by the same safe path as a raw document.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.digest.compact import compact
from worker.digest.digest import Analysis
from worker.digest.model import Digest

CountFn = Callable[[Sequence[str]], list[int]]  # texts -> token counts (one batch)


def _time(stamp: str) -> str:
    return stamp[11:19] if len(stamp) >= 19 and stamp[10] == "T" else stamp


def digest_lines(d: Digest) -> list[str]:
    head = f"{d.lines} lines, {d.templates_total} line templates"
    if d.span is not None:
        head += f", {_time(d.span.first)} to {_time(d.span.last)}"
    if d.severity:
        head += "; " + ", ".join(f"{n} {lv}" for lv, n in d.severity.items())
    lines = ["Digest: " + head + "."]
    if d.outliers:
        o = d.outliers[0]
        lines.append(f"Outlier: line {o.line} {o.name}={o.value:g} (others {o.others_min:g}–{o.others_max:g}).")
    lines.append("Log, each line template once (×N lines a–b: how many lines share it and where):")
    return lines


def digest_prompt(d: Digest, compacted: str) -> str:
    return "\n".join(digest_lines(d)) + "\n" + compacted


@dataclass(frozen=True)
class DocumentText:
    text: str              # what goes to the model after the instruction
    compacted: bool
    raw_tokens: int        # tokens of the raw document (0 when not counted)
    tokens: int            # tokens of `text` (0 when not counted)


def document_text(raw: str, analysis: Analysis, *, min_saving: float, count: CountFn | None = None) -> DocumentText:
    """The digest prompt when it saves at least min_saving (characters, then tokens), else the raw document.

    With `count`, both texts are counted in one batch and the digest prompt is kept only if it has
    at most (1 - min_saving) of the raw tokens: it never has more tokens than the raw document.
    """
    c = compact(analysis, raw, min_saving)
    if not c.applied:
        return DocumentText(raw, False, 0, 0)
    text = digest_prompt(analysis.digest, c.text)
    if count is None:
        return DocumentText(text, True, 0, 0)
    raw_n, n = count([raw, text])
    if n > (1.0 - min_saving) * raw_n:
        return DocumentText(raw, False, raw_n, raw_n)
    return DocumentText(text, True, raw_n, n)
