"""The redaction pass: a text in, the same text with each secret's value as `<redacted:kind>` out.

    redactor(policy).text(s) -> (s', {kind: count})
    scrub(s) -> s'   (the installed policy: log lines, span attributes, dead-letter reasons)

Only the value goes: the key, the scheme (`Bearer`), the URL around a password and the rest of the
line stay, and no line is added or removed, so line counts, templates and first-line numbers of the
digest are those of the original. Cost: one scan of the whole text with the document screen
(worker/redaction/screen.py: Hyperscan, ASCII text), then the combined prefilter (worker/redaction/rules.py:
RE2) over the spans where the screen found its families (none, for most documents; the whole text where
there is no screen); only the lines the prefilter hits run the rules. Private key blocks span lines:
their base64 lines are redacted between the BEGIN and END markers.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter

from worker.redaction.policy import Policy

MARK = re.compile(r"<redacted:[a-z0-9_]+>")
_PK_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:[^\n]*")
_PK_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_PK_HITS = (b"PRIVATE KEY", b"PuTTY-User-Key")  # the prefilter's private-key family
_PK_LINES = 400  # a block without its END marker is redacted this many lines on, at most


def marker(kind: str) -> str:
    return f"<redacted:{kind}>"


class _Taken:
    """Disjoint spans of a line, sorted: an earlier rule's span is not claimed again (log n a claim)."""

    def __init__(self, spans=()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for s, e in spans:
            self.claim(s, e)

    def claim(self, s: int, e: int) -> bool:
        """Take [s, e) unless it overlaps a span taken before; True when taken."""
        i = bisect.bisect_left(self.starts, s)
        if (i > 0 and self.ends[i - 1] > s) or (i < len(self.starts) and self.starts[i] < e):
            return False
        self.starts.insert(i, s)
        self.ends.insert(i, e)
        return True

    def holds(self, s: int, e: int) -> bool:
        """[s, e) lies inside one span taken before (a match there cannot claim its span: skip it)."""
        i = bisect.bisect_right(self.starts, s)
        return i > 0 and self.ends[i - 1] >= e


class Redactor:
    """Applies one policy's rules; immutable after construction, so threads and processes share it."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        from worker.redaction.rules import build_rules  # noqa: PLC0415 - detect-secrets loads on first use

        self.rules = build_rules(policy) if policy.enabled else None

    def text(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with every secret's value replaced, and the count of each kind replaced."""
        r = self.rules
        if r is None:
            return text, {}
        counts: Counter[str] = Counter()
        raw = text.encode("utf-8", "replace")
        ascii_ = text.isascii()
        spans = r.screen.spans(raw) if ascii_ and r.screen is not None else None  # where the union can match
        hits = list(r.prefilter.finditer(raw)) if spans is None else \
            [m for s, e in spans for m in r.prefilter.finditer(raw, s, e)]
        if any(m.group() in _PK_HITS for m in hits):
            text = _private_keys(text, counts)  # lines stay lines: the hits' line numbers hold
            ascii_ = False  # offsets moved: go by line numbers
        starts = self._line_starts(text, raw, [m.start() for m in hits], ascii_)
        if not starts:
            return text, dict(counts)
        pieces, at = [], 0
        for s in sorted(starts):
            e = text.find("\n", s)
            e = len(text) if e < 0 else e
            pieces += [text[at:s], self.line(text[s:e], counts)]
            at = e
        pieces.append(text[at:])
        return "".join(pieces), dict(counts)

    def _line_starts(self, text: str, raw: bytes, hits: list[int], same_offsets: bool) -> set[int]:
        """The start offsets of the lines the prefilter (at byte offsets `hits` of `raw`, the text's UTF-8)
        or an extra pattern hits. Unless `same_offsets` (ASCII text, unchanged), byte offsets become
        character offsets through the line count."""
        r = self.rules
        if same_offsets:
            starts = {text.rfind("\n", 0, h) + 1 for h in hits}
        else:
            starts = _char_line_starts(text, raw, hits)
        for rx in r.extra:
            starts.update(text.rfind("\n", 0, m.start()) + 1 for m in rx.finditer(text))
        return starts

    def line(self, line: str, counts: Counter[str]) -> str:
        """One line with its secrets' values replaced; `counts` gains one per value."""
        if self.rules is None:
            return line
        taken = _Taken(m.span() for m in MARK.finditer(line)) if "<redacted:" in line else _Taken()
        spans: list[tuple[int, int, str]] = []
        families = self.rules.families_of(line)
        for rule in self.rules.line:
            if rule.family not in families:
                continue
            for m in rule.regex.finditer(line):
                if taken.holds(m.start(), m.end() + 1):   # its span would start in a taken one: skip it (a token of
                    continue                               # many matches costs one span, not one each)
                got = rule.span(m)
                if got is not None and taken.claim(got[0], got[1]):
                    spans.append(got)
        if not spans:
            return line
        out, at = [], 0
        for s, e, kind in sorted(spans):
            out += [line[at:s], marker(kind)]
            counts[kind] += 1
            at = e
        out.append(line[at:])
        return "".join(out)

    def scrub(self, s: str) -> str:
        return self.text(s)[0] if self.rules is not None else s


def _char_line_starts(text: str, raw: bytes, hits: list[int]) -> set[int]:
    """Byte offsets of hits in `raw` (text's UTF-8) as the character offsets of their lines' starts."""
    numbers, pos, n = set(), 0, 0
    for h in hits:  # ascending, as the scan found them
        n += raw.count(b"\n", pos, h)
        pos = h
        numbers.add(n)
    starts, at, no = set(), 0, 0
    for target in sorted(numbers):
        while no < target:
            at = text.index("\n", at) + 1
            no += 1
        starts.add(at)
    return starts


def _private_keys(text: str, counts: Counter[str]) -> str:
    """Each private key block's base64 (on the BEGIN line after the marker, or on the lines up to the END
    marker) as one marker per line; markers, headers (Proc-Type: ...) and line prefixes stay."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _PK_BEGIN.search(lines[i])
        if m is None:
            i += 1
            continue
        counts["private_key"] += 1
        head, rest = lines[i][:m.end()], lines[i][m.end():]
        end = _PK_END.search(rest)
        if end is not None or _B64_RUN.search(rest):  # the block on one line (JSON with \n escapes)
            body = rest[:end.start()] if end is not None else rest
            tail = rest[end.start():] if end is not None else ""
            lines[i] = head + (marker("private_key") if _B64_RUN.search(body) else body) + tail
            if end is not None:
                i += 1
                continue
        j = i + 1
        while j < len(lines) and j <= i + _PK_LINES:
            end = _PK_END.search(lines[j])
            if end is None and not _B64_RUN.search(lines[j]) and lines[j].strip() and ":" not in lines[j]:
                break  # the block ended without its END marker (a cut log)
            cut = end.start() if end is not None else len(lines[j])
            lines[j] = _B64_RUN.sub(marker("private_key"), lines[j][:cut]) + lines[j][cut:]
            if end is not None:
                break
            j += 1
        i = j + 1
    return "\n".join(lines)


@functools.lru_cache(maxsize=8)
def redactor(policy: Policy) -> Redactor:
    """The process's redactor of `policy` (the rules compile once per process and policy)."""
    return Redactor(policy)


_installed = Policy()


def install(policy: Policy) -> None:
    """The policy `scrub` applies in this process (set once at start, from the settings); its rules are
    compiled here, at start, not on the first document."""
    global _installed
    _installed = policy
    redactor(policy)


def scrub(s: str) -> str:
    """`s` redacted by the installed policy (log lines, span attributes, dead-letter reasons)."""
    return redactor(_installed).scrub(s) if s else s


def scrub_tree(obj):
    """A JSON-like value (the input's `attributes`) with its strings scrubbed; a string under a credential
    key (`{"api_key": "..."}`) is redacted as the key=value rule redacts `api_key="..."`."""
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, list):
        return [scrub_tree(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if isinstance(v, str) and isinstance(k, str) and '"' not in v:
            line = scrub(f'{k}="{v}"')
            out[k] = line[len(k) + 2:-1] if line.startswith(f'{k}="') and line.endswith('"') else scrub(v)
        else:
            out[k] = scrub_tree(v)
    return out


def dead_letter_value(value: bytes | None) -> bytes | None:
    """A dead letter's value: the original bytes (replay needs them), or, with redaction.dead_letters,
    its UTF-8 text redacted (bytes that are not UTF-8 stay as they are)."""
    if value is None or not (_installed.enabled and _installed.dead_letters):
        return value
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return value
    clean = redactor(_installed).scrub(text)
    return value if clean == text else clean.encode("utf-8")


def scrub_headers(headers):
    """Record headers for the output topic: a UTF-8 value is scrubbed as `key=value` is (so an
    `authorization` or `x-api-key` header loses its value); other bytes pass as they are."""
    out = []
    for k, v in headers or ():
        if v is not None and _installed.enabled:
            try:
                text = v.decode("utf-8")
            except UnicodeDecodeError:
                out.append((k, v))
                continue
            clean = scrub_tree({k: text})[k]
            v = v if clean == text else clean.encode("utf-8")
        out.append((k, v))
    return tuple(out)
