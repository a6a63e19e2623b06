"""The document text given to the model: a few digest lines, then the compacted text.

The instruction is added by the engine (model.instruction, chat template); the
whole prompt is tokenized by the same safe path as a raw document.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.digest.compact import compact
from worker.digest.digest import Analysis
from worker.digest.render import outlier_sentence

CountFn = Callable[[Sequence[str]], list[int]]  # texts -> token counts (one batch)


def _time(stamp: str) -> str:
    return stamp[11:19] if len(stamp) >= 19 and stamp[10] == "T" else stamp


def digest_lines(d: dict) -> list[str]:
    head = f"{d['lines']} lines, {d['templates_total']} line templates"
    if d["span"] is not None:
        head += f", {_time(d['span']['first'])} to {_time(d['span']['last'])}"
    if d["severity"]:
        head += "; " + ", ".join(f"{n} {lv}" for lv, n in d["severity"].items())
    lines = ["Digest: " + head + "."]
    if d["outliers"]:
        lines.append(outlier_sentence(d["outliers"][0]))
    lines.append("Log, each line template once (×N lines a–b: how many lines share it and where):")
    return lines


def digest_prompt(d: dict, compacted: str) -> str:
    return "\n".join(digest_lines(d)) + "\n" + compacted


@dataclass(frozen=True)
class DocumentText:
    text: str              # what goes to the model after the instruction
    compacted: bool
    raw_tokens: int        # tokens of the raw document (0 when not counted)
    tokens: int            # tokens of `text` (0 when not counted)


def candidates(raws: Sequence[str], analyses: Sequence[Analysis], *, min_saving: float) -> list[DocumentText]:
    """Per document: the digest prompt when it saves at least min_saving of the characters, else the raw one."""
    out: list[DocumentText] = []
    for raw, a in zip(raws, analyses):
        c = compact(a, raw, min_saving)
        out.append(DocumentText(digest_prompt(a.digest, c.text), True, 0, 0) if c.applied
                   else DocumentText(raw, False, 0, 0))
    return out


def token_gate(raws: Sequence[str], texts: list[DocumentText], *, min_saving: float, count: CountFn) -> list[DocumentText]:
    """Keep a digest prompt only if it has at most (1 - min_saving) of the raw document's tokens (one batch)."""
    todo = [i for i, t in enumerate(texts) if t.compacted]
    if not todo:
        return texts
    out = list(texts)
    counts = count([t for i in todo for t in (raws[i], texts[i].text)])
    for j, i in enumerate(todo):
        raw_n, n = counts[2 * j], counts[2 * j + 1]
        keep = n <= (1.0 - min_saving) * raw_n
        out[i] = DocumentText(texts[i].text if keep else raws[i], keep, raw_n, n if keep else raw_n)
    return out


def document_texts(raws: Sequence[str], analyses: Sequence[Analysis], *, min_saving: float,
                   count: CountFn | None = None) -> list[DocumentText]:
    """Per document: the digest prompt when it saves at least min_saving, else the raw document.

    The character gate comes first (cheap); with `count`, the documents that pass are counted raw
    and compacted in one batch, and the digest prompt is kept only if it has at most (1 - min_saving)
    of the raw tokens: the model never gets more tokens than the raw document would give it.
    """
    texts = candidates(raws, analyses, min_saving=min_saving)
    return texts if count is None else token_gate(raws, texts, min_saving=min_saving, count=count)


def document_text(raw: str, analysis: Analysis, *, min_saving: float, count: CountFn | None = None) -> DocumentText:
    """document_texts for one document."""
    return document_texts([raw], [analysis], min_saving=min_saving, count=count)[0]
