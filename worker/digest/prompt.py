"""The document text given to the model: the digest's facts, then the compacted text (docs/prompt.md).

The facts are the span, the counts by level, the failures with their values and
times, the entities and the first outlier, as short labelled lines; the log
follows with each line template once. The instruction is added by the engine
(model.instruction, chat template); the whole prompt is tokenized by the same
safe path as a raw document.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.digest.compact import compact
from worker.digest.digest import Analysis
from worker.digest.render import outlier_sentence, short_pattern
from worker.digest.timeparse import parse_line

CountFn = Callable[[Sequence[str]], list[int]]  # texts -> token counts (one batch)


MAX_FAILURES = 5  # failures listed in the facts
MAX_ENTITIES = 6  # entities of each kind listed
LOG_HEADER = "Log (each line pattern once; [×N lines a–b] says how many lines share it and where):"


MAX_LINE_CHARS = 160  # a failure's line is cut here
_SYSLOG_STAMP = re.compile(r"^(?:<\d+>)?[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d +")
_LEVEL = re.compile(r"^\s*(?:FATAL|CRITICAL|CRIT|SEVERE|ERROR|ERR|WARN|WARNING|NOTICE|INFO|DEBUG|TRACE)\b[:\s]*")


def _time(stamp: str) -> str:
    """hh:mm:ss of an ISO stamp (yearless ones too), else the stamp."""
    _, sep, clock = stamp.partition("T")
    return clock[:8] if sep and len(clock) >= 8 and clock[2] == ":" else stamp


def failure_message(example: str, stamp) -> str:
    """A failure's line without its leading timestamp and level word (the host stays: it says where)."""
    text = _SYSLOG_STAMP.sub("", example, count=1)
    if stamp is not None and stamp.text in text:
        text = text[text.index(stamp.text) + len(stamp.text):]
    text = text.lstrip(" ,;|]")
    host, _, rest = text.partition(" ")
    if _LEVEL.match(rest):
        text = f"{host} {_LEVEL.sub('', rest, count=1)}"
    else:
        text = _LEVEL.sub("", text, count=1)
    text = text.strip()
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS - 1] + "…"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _span(span: dict) -> str:
    first, last = span["first"], span["last"]
    day = first[:10] if len(first) >= 19 and first[10] == "T" and first[:4].isdigit() else ""
    zone = " UTC" if first.endswith("Z") else ""
    return f"{day + ' ' if day else ''}{_time(first)} to {_time(last)}{zone} ({_duration(span['seconds'])})"


def _failure(t: dict) -> str:
    stamp = parse_line(t["example"])
    when = _time(stamp.text) if stamp is not None else f"line {t['first_line']}"
    text = failure_message(t["example"], stamp) if t["example"] else short_pattern(t["pattern"])
    line = f'{when} {t.get("level") or "ERROR"} "{text}"'
    line += f" ({t['count']} lines, {t['first_line']}–{t['last_line']})" if t["count"] > 1 else f" (line {t['first_line']})"
    values = [f"{v['name']}: " + ", ".join(f"{c['value']} ×{c['count']}" for c in v["top"][:3])
              for v in t.get("variables", ()) if v.get("top") and v["kind"] != "time" and v["distinct"] > 1]
    return line + (f"; {'; '.join(values[:2])}" if values else "")


def _entities(entities: list[dict]) -> list[str]:
    by_kind: dict[str, list[str]] = {}
    for e in entities:
        by_kind.setdefault(e["kind"], []).append(f"{e['value']} ({e['count']})")
    return [f"- {kind}s: {', '.join(vals[:MAX_ENTITIES])}" for kind, vals in by_kind.items()]


def digest_lines(d: dict) -> list[str]:
    """The digest's facts as short labelled lines, then the log header (docs/prompt.md)."""
    lines = ["Facts:"]
    if d["span"] is not None:
        lines.append(f"- time: {_span(d['span'])}")
    levels = ", ".join(f"{n} {lv}" for lv, n in d["severity"].items())
    lines.append(f"- lines: {d['lines']}" + (f" ({levels})" if levels else "") + f", {d['templates_total']} patterns")
    failures = d["failures"][:MAX_FAILURES]
    if failures:
        lines.append("- failures:")
        lines += [f"  {k}. {_failure(t)}" for k, t in enumerate(failures, 1)]
    else:
        lines.append("- failures: none")
    lines += _entities(d["entities"])
    if d["outliers"]:
        lines.append("- " + outlier_sentence(d["outliers"][0]))
    lines.append(LOG_HEADER)
    return lines


def digest_prompt(d: dict, compacted: str) -> str:
    return "\n".join(digest_lines(d)) + "\n" + compacted


BYTE_MARGIN = 0.5  # kept_by_bytes: the share of the token gate's byte allowance that needs no count


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


def kept_by_bytes(raw: str, prompt: str, *, min_saving: float) -> bool:
    """True when a digest prompt is kept on the bytes alone, without counting the raw text's tokens: it has
    at most BYTE_MARGIN of the (1 - min_saving) share of the raw bytes. The token gate would keep it too unless
    the prompt held over 1 / BYTE_MARGIN times as many tokens per byte as the raw text."""
    return _nbytes(prompt) <= BYTE_MARGIN * (1.0 - min_saving) * _nbytes(raw)


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def token_gate(raws: Sequence[str], texts: list[DocumentText], *, min_saving: float, count: CountFn) -> list[DocumentText]:
    """Keep a digest prompt only if it has at most (1 - min_saving) of the raw document's tokens (one batch)."""
    todo = [i for i, t in enumerate(texts) if t.compacted]
    if not todo:
        return texts
    out = list(texts)
    counts = count([t for i in todo for t in (raws[i], texts[i].text)])
    for j, i in enumerate(todo):
        out[i] = gate_counted(raws[i], texts[i].text, counts[2 * j], counts[2 * j + 1], min_saving=min_saving)
    return out


def gate_counted(raw: str, prompt: str, raw_n: int, n: int, *, min_saving: float) -> DocumentText:
    """The token gate on counts already made: the digest prompt (`n` tokens) if it has at most
    (1 - min_saving) of the raw document's `raw_n`, else the raw document."""
    keep = n <= (1.0 - min_saving) * raw_n
    return DocumentText(prompt if keep else raw, keep, raw_n, n if keep else raw_n)


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
