"""Severity levels of log lines, read from a template's constant tokens (one look per template).

A level is an upper-case level word among the first tokens (`ERROR`, `WARN`,
`SEVERE`, `ERROR:root:`), a bracketed one in any case (`[error]`, `<warn>`),
an Android-style `E/Tag`, or the value of a level key (`level=error`).
Levels are normalized to FATAL, CRITICAL, ERROR, WARN, NOTICE, INFO, DEBUG, TRACE.
"""

from __future__ import annotations

import functools
import re

from worker.messages.levels import LETTERS, SPELLINGS

# The spellings (of the one table) that name a level inside a template's words; the rest (`note`,
# `inf`, `config`, `trc`...) are message text there more often than not.
LEVEL_WORDS = {w: SPELLINGS[w] for w in (
    "fatal", "panic", "emerg", "emergency", "alert", "crit", "critical", "severe", "error", "err", "eror",
    "warn", "warning", "notice", "info", "information", "informational", "debug", "fine", "finer", "dbg",
    "trace", "finest", "verbose",
    "erro", "wrn", "debu", "fata", "pani", "dpanic")}  # the last row: Go's tags
LEVEL_KEYS = frozenset({"level", "lvl", "severity", "loglevel", "log_level", "priority"})
_ANDROID = {c: LETTERS[c] for c in "VDIWEFA"}  # logcat's priority letters
_TOKEN = re.compile(r"[^\s=;,()|{}]+")
FIRST_TOKENS = 8  # a level word further into the line is message text


def level_of_token(token: str) -> str | None:
    """The level a token names, or None ("ERROR", "[error]", "<warn>", "ERROR:root:x", "E/Tag")."""
    if len(token) >= 2 and token[1] == "/" and token[0] in _ANDROID:
        return _ANDROID[token[0]]
    bracketed = len(token) >= 3 and token[0] in "[<" and token[-1] in "]>"
    word = token.strip("[]<>:").split(":", 1)[0]
    if not word or not (bracketed or word.isupper()):
        return None
    return LEVEL_WORDS.get(word.lower())


# per byte: an ASCII letter lower-cased, any other byte a space (letter_runs)
_RUNS = bytes(c | 0x20 if 65 <= c <= 90 or 97 <= c <= 122 else 0x20 for c in range(256))
_LEVEL_RUNS = frozenset(w.encode() for w in LEVEL_WORDS)
_ANDROID_AT = re.compile(r"(?<![^\s=;,()|{}])[VDIWEFA]/")   # a token (_TOKEN) opening with a logcat letter and `/`


def letter_runs(text: str) -> list[bytes]:
    """The maximal runs of ASCII letters of a text, lower-cased, as bytes (a non-ASCII character's UTF-8 bytes end a
    run): one translate and one split, a fraction of what a regular expression's findall costs."""
    return text.encode("utf-8", "surrogatepass").translate(_RUNS).split()


@functools.lru_cache(maxsize=8192)  # patterns repeat across the documents of a stream
def level_of_pattern(pattern: str) -> str | None:
    """The level of a template pattern (placeholders never name one), or None.

    Most patterns name none, and most of those are told apart by what every level needs: a level word is a whole
    run of ASCII letters (its token's other characters are brackets, `:` and the delimiters of _TOKEN), and a
    logcat tag a letter of _ANDROID and `/` opening a token. An ASCII pattern with neither names none; the rest
    are read token by token (tokens_level)."""
    if pattern.isascii() and _LEVEL_RUNS.isdisjoint(letter_runs(pattern)) and (
            "/" not in pattern or _ANDROID_AT.search(pattern) is None):
        return None
    return tokens_level(pattern)


def tokens_level(pattern: str) -> str | None:
    """level_of_pattern read token by token, the first FIRST_TOKENS tokens (its definition)."""
    for token in _TOKEN.findall(pattern)[:FIRST_TOKENS]:
        if token.startswith("<") and token.endswith(">") and token[1:-1] in _PLACEHOLDERS:
            continue
        level = level_of_token(token)
        if level is not None:
            return level
    return None


def level_of_value(value: str) -> str | None:
    """A level key's value ("error", "W", "warning") as a level, or None."""
    v = value.strip("\"'").lower()
    if len(v) == 1:
        return _ANDROID.get(v.upper())
    return LEVEL_WORDS.get(v)


_PLACEHOLDERS = frozenset({"n", "hex", "ip", "uuid", "ts", "q", "*"})
