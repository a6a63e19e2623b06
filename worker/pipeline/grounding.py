"""The grounding check: every identifier in a model summary must occur in its document or digest.

    check(summary, document, digest, fallback, action) -> Checked(text, grounding)

Identifiers are the tokens an operator acts on and a model can invent: IPv4 addresses, UUIDs,
times of day (05:00, 09:34:55.102), hex values, paths, host names and other dotted names
(org.apache.hadoop), element names and codes that mix letters and digits (gnb-017, eth0, T300),
snake_case and CamelCase words (ERR_TIMEOUT, SMContextStatusNotify), words in capitals (SCTP,
ECONNREFUSED), numbers, and quoted strings. Each must occur, case-insensitively, in the document text
or in the digest (its strings and numbers; numbers also match with thousands separators
removed). A sentence holding an unsupported identifier is
- dropped (action "drop", the default; when no sentence is left, the summary is `fallback`,
  the digest in plain English),
- marked with "[unverified: ...]" (action "mark"), or
- left as it is (action "off"): the output still reports what was unsupported.
Pure: no Kafka, no model, no shared state. Written with regular expressions rather than a
named-entity library: telemetry identifiers are not the people and places such models know.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_PATTERNS = [
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ("ip", r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"),
    ("time", r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?![\d:])"),
    ("hex", r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"),
    ("path", r"(?<![\w/])(?:/[\w.@-]+){2,}/?"),
    ("host", r"\b[A-Za-z][\w-]*(?:\.[A-Za-z0-9][\w-]*)+\.[A-Za-z][\w-]*\b|\b[\w-]*\d[\w-]*\.[A-Za-z][\w-]+\b"
             r"|\b[A-Za-z][\w-]*\.(?:com|net|org|local|internal|io|svc|lan)\b"),
    ("dotted", r"\b[A-Za-z_][\w-]+(?:\.[A-Za-z_][\w-]*)+\b"),
    ("code", r"\b(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9][\w-]*[A-Za-z0-9]\b"),
    ("snake", r"\b[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+\b"),
    ("camel", r"\b(?=[A-Za-z0-9]*[a-z][A-Z])[A-Za-z][A-Za-z0-9]*\b"),
    ("caps", r"\b[A-Z][A-Z0-9_]{2,}\b"),
    ("number", r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|(?<![\w.,])\d+(?:\.\d+)?\b"),
    ("quoted", r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|(?<!\w)'([^'\n]{2,200})'(?!\w)"),
]
_TOKEN = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _PATTERNS))
_PLACEHOLDER = re.compile(r"<(?:n|hex|ip|uuid|ts|q|\*)>")
_NUMERIC = re.compile(r"[\d.:]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
# Capitalised words that are English or time notation, not identifiers.
_PLAIN_CAPS = frozenset({"UTC", "GMT", "THE", "AND", "NOT", "FOR", "ALL", "API", "URL", "CPU", "RAM", "N/A"})


@dataclass(frozen=True)
class Grounding:
    checked: int  # identifiers looked up
    unsupported: list[str] = field(default_factory=list)  # in order of appearance, each once
    dropped_sentences: int = 0
    fallback: bool = False  # nothing survived: the summary is the digest rendering

    def as_dict(self) -> dict:
        return {"checked": self.checked, "unsupported": list(self.unsupported),
                "dropped_sentences": self.dropped_sentences, "fallback": self.fallback}


@dataclass(frozen=True)
class Checked:
    text: str
    grounding: Grounding


def identifiers(text: str) -> list[str]:
    """The identifier-like tokens of a text, in order (a quoted string as its content)."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "quoted":  # its content; a quote cut short with "…" (the digest rendering's) as its prefix
            value = next(g for g in m.groups()[m.re.groupindex["quoted"]:] if g).rstrip("…").rstrip()
        else:
            value = m.group(kind)
        if kind == "caps" and value in _PLAIN_CAPS:
            continue
        out.append(value.strip())
    return out


def _flatten(value, into: list[str]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _flatten(v, into)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, into)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, float):
        into.append(f"{value:g}")
        into.append(repr(value))
    else:
        into.append(str(value))


class Support:
    """What a summary may cite: the document and its digest, lower-cased, numbers also without commas."""

    def __init__(self, document: str, digest: dict | None, extra: str = "") -> None:
        parts = [document, extra]
        if digest:
            _flatten(digest, parts)
        self.text = "\n".join(parts).lower()
        self.numbers = self.text.replace(",", "")

    def has(self, ident: str) -> bool:
        low = ident.lower()
        plain = low.replace(",", "")
        if _NUMERIC.fullmatch(plain):  # a number or time: whole, not a piece of a longer one; as written, or
            return _whole(low, self.text) or _whole(plain, self.numbers)  # without thousands separators
        if _PLACEHOLDER.search(low):  # a line template quoted (the digest's <n>, <*>, ...): each literal part
            return all(part.strip() in self.text for part in _PLACEHOLDER.split(low) if part.strip())
        return low in self.text


def _whole(needle: str, hay: str) -> bool:
    """Whether `needle` occurs in `hay` with no digit or dot just before it and no digit just after it
    (the regular expression `(?<![\\d.])needle(?!\\d)`, `\\d` being a Unicode decimal digit, as
    `str.isdecimal` reads one). `str.find` jumps between the needle's occurrences: a window's text
    is tens of kilobytes, and a regular expression that opens with a look-behind tries every position."""
    n, i = len(needle), hay.find(needle)
    while i >= 0:
        before = hay[i - 1] if i else ""
        after = hay[i + n] if i + n < len(hay) else ""
        if not (before == "." or before.isdecimal()) and not after.isdecimal():
            return True
        i = hay.find(needle, i + 1)
    return False


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s.strip()]


def check(summary: str, document: str, digest: dict | None, fallback: str | Callable[[], str], action: str = "drop",
          extra: str = "") -> Checked:
    """The summary as published (see the module docstring) and its grounding record. `fallback` (or
    what it returns, called only when needed) is the digest in plain English."""
    support = Support(document, digest, extra)
    checked = 0
    unsupported: list[str] = []
    kept: list[str] = []
    dropped = 0
    for sent in sentences(summary):
        bad = []
        for ident in identifiers(sent):
            checked += 1
            if not support.has(ident):
                bad.append(ident)
        for b in bad:
            if b not in unsupported:
                unsupported.append(b)
        if not bad or action == "off":
            kept.append(sent)
        elif action == "mark":
            kept.append(f"{sent} [unverified: {', '.join(dict.fromkeys(bad))}]")
        else:
            dropped += 1
    text = " ".join(kept)
    use_fallback = action == "drop" and not text.strip()
    if use_fallback:
        text = fallback() if callable(fallback) else fallback
    return Checked(text,
                   Grounding(checked, unsupported, dropped, use_fallback))
