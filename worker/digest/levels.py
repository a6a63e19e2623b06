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


@functools.lru_cache(maxsize=8192)  # patterns repeat across the documents of a stream
def level_of_pattern(pattern: str) -> str | None:
    """The level of a template pattern (placeholders never name one), or None."""
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
