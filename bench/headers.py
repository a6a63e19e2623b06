"""Header detection measured on a labelled corpus of real log formats (`python -m bench.quality`, key `header_detection`).

The corpus: `formats.jsonl` of ../shared/formats (not shipped with Ribbon: its README gives the licences),
one record a line (or a multi-line record), labelled with its format and, where its source's tests
assert them, the header fields (`expect`: timestamp, level, host, message, as written in the line) and
the levels that source normalises (`normalized.level`).

Each record is read alone by the digest's format layer (worker/digest/formats.py: JSON lines, logfmt,
else the header grammar of worker/digest/header.py). A record's predicted fields are its first line's
(timestamp, host); its level token is the first line's, or the first level token of its later
lines when the first has none (a JUL record's `INFO:` second line); its message is that line's
message and the record's lines after it, as they are, up to a line that opens a stack trace
(worker/multiline.py's TRACE: a frame, `Traceback (most recent call last):`, an exception's class line,
`Caused by:`): a trace is the record's stack, no part of the message its first line logged (the tests'
convention that asserts one: Datadog's pipelines move it to `error.stack`). Per field, over the records whose `expect` asserts it:
- predicted: the detector gives a non-empty value; correct: it equals the asserted one (timestamp: the
  text, brackets stripped; host: exact; message: equal after stripping spaces at both ends; level: the
  token equal ignoring case and brackets, or both naming the same normalised level, as `6` and `INFO`);
- precision = correct / predicted, recall = correct / asserted, per format; then the macro average over
  the formats that assert the field (the corpus README's rule: big formats do not dominate), with the
  micro (per record) figures beside it.
A field asserted as "" (the line has none: the labelled file of formats absent from that corpus,
tests/digest/unseen_formats.jsonl, asserts absences) counts a value predicted there as predicted and
wrong (a precision miss), and not in recall's denominator.
Two secondary checks: `message_start`, the message starting at the right offset (its first 24
characters those of the asserted body: a body the source's test cuts short counts), and
`level_normalized`, the normalised level against `normalized.level` (lnav's and Datadog's names).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from worker.digest import header, header_rows
from worker.digest.formats import read
from worker.messages.levels import level_word
from worker.multiline import TRACE

_TRACE = re.compile(rf"[ \t]*{TRACE}")

FIELDS = ("timestamp", "level", "host", "message")


def _norm_level(token: str | None) -> str | None:
    if not token:
        return None
    return level_word(token) or header.EXTRA_LEVELS.get(token.strip("[]<>():").upper())


def _untraced(lines: list[str]) -> list[str]:
    """The lines before the first that opens a stack trace (worker/multiline.py's TRACE)."""
    return next((lines[:i] for i, ln in enumerate(lines) if _TRACE.match(ln)), lines)


def predict(text: str) -> dict:
    """The detector's fields of one record (see the module docstring)."""
    r = read(text)
    lines = r.lines
    if r.tokens is not None:                                 # Windows events: the number as written
        tokens = r.tokens
    elif r.form in ("json", "logfmt"):                       # the normalised level
        tokens = [lv or "" for lv in r.levels]
    else:                                                    # the header grammar's token, its level word
        tokens = [header.level_token(t) for t in header_rows.columns("\n".join(lines), lines).field(4)]
    at = next((i for i, t in enumerate(tokens) if t), 0)
    out = {"timestamp": r.stamps[0].strip("[]") if r.stamps else "",
            "host": r.hosts[0] if r.hosts else "",
            "level": tokens[at] if tokens else "",
            "level_normalized": r.levels[at] if r.levels else None,
            "message": "\n".join([r.messages[at], *_untraced(lines[at + 1:])]) if r.messages else ""}
    out["message_start"] = out["message"]
    return out


def _correct(field: str, got, want: str) -> bool:
    if field == "message":
        return got.strip() == want.strip()
    if field == "message_start":
        return got.strip().startswith(want.strip()[:24])
    if field == "level":
        g = got.strip("[]<>() ").lower()
        return g == want.strip("[]<>() ").lower() or (_norm_level(got) is not None and _norm_level(got) == _norm_level(want))
    if field == "level_normalized":
        return got is not None and got == _norm_level(want)
    return got == want


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(sum(xs) / len(xs), 4) if xs else None


def measure(corpus: Path) -> dict:
    """Per format and over the corpus (a folder holding formats.jsonl, or a .jsonl file of the same records):
    precision and recall of each field (see the module docstring)."""
    path = corpus if corpus.suffix == ".jsonl" else corpus / "formats.jsonl"
    records = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln]
    counts: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))   # format -> field -> asserted, predicted, correct
    misses: dict = defaultdict(list)
    for rec in records:
        want = {k: v for k, v in rec.get("expect", {}).items() if k in FIELDS}
        if want.get("message"):
            want["message_start"] = want["message"]
        if rec.get("normalized", {}).get("level"):
            want["level_normalized"] = rec["normalized"]["level"]
        if not want:
            continue
        got = predict(rec["line"])
        for field, value in want.items():
            c = counts[rec["format"]][field]
            c[0] += bool(value)
            c[1] += bool(got[field])
            ok = bool(got[field]) and bool(value) and _correct(field, got[field], value)
            c[2] += ok
            if not ok if value else got[field]:
                misses[rec["format"]].append(field)
    per_format = {fmt: {f: {"asserted": a, "precision": _ratio(k, p), "recall": _ratio(k, a)}
                        for f, (a, p, k) in sorted(fields.items())} for fmt, fields in sorted(counts.items())}
    total = {}
    for field in (*FIELDS, "message_start", "level_normalized"):
        rows = [v[field] for fmt, v in per_format.items() if field in v and any(counts[fmt][field][:2])]
        sums = [counts[fmt][field] for fmt in counts if field in counts[fmt]]
        total[field] = {"formats": len(rows), "records": sum(s[0] for s in sums),
                        "precision": _mean([r["precision"] for r in rows]), "recall": _mean([r["recall"] for r in rows]),
                        "precision_micro": _ratio(sum(s[2] for s in sums), sum(s[1] for s in sums)),
                        "recall_micro": _ratio(sum(s[2] for s in sums), sum(s[0] for s in sums))}
    return {"corpus": str(corpus), "records": len(records), "total": total, "per_format": per_format,
            "misses": {k: sorted(set(v)) for k, v in sorted(misses.items())}}


def table(res: dict) -> None:
    print(f"\nheader detection ({res['corpus']}, {res['records']} records; macro over formats, micro in brackets)")
    print(f"{'field':18} {'formats':>7} {'records':>7} {'precision':>17} {'recall':>17}")
    for field, t in res["total"].items():
        print(f"{field:18} {t['formats']:7} {t['records']:7} {t['precision']!s:>8} ({t['precision_micro']!s:>6}) "
              f"{t['recall']!s:>8} ({t['recall_micro']!s:>6})")


if __name__ == "__main__":     # python -m bench.headers [FILE.jsonl | DIR]: the table of one labelled file
    import sys
    res = measure(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/digest/unseen_formats.jsonl"))
    table(res)
    for fmt, fields in res["misses"].items():
        print(f"  {fmt}: {', '.join(fields)}")
