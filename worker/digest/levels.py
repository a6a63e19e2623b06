"""Severity levels of log lines, read from a template's constant tokens (one look per template).

A level is an upper-case level word among the first tokens (`ERROR`, `WARN`,
`SEVERE`, `ERROR:root:`), a bracketed one in any case (`[error]`, `<warn>`),
an Android-style `E/Tag`, or the value of a level key (`level=error`).
Levels are normalized to FATAL, CRITICAL, ERROR, WARN, NOTICE, INFO, DEBUG, TRACE.
"""

from __future__ import annotations

import functools
import re

from worker.digest.levels_table import SPELLINGS

LEVEL_WORDS = {
    "fatal": "FATAL", "panic": "FATAL", "emerg": "FATAL", "emergency": "FATAL",
    "alert": "CRITICAL", "crit": "CRITICAL", "critical": "CRITICAL", "severe": "CRITICAL",
    "error": "ERROR", "err": "ERROR", "eror": "ERROR",
    "warn": "WARN", "warning": "WARN",
    "notice": "NOTICE",
    "info": "INFO", "information": "INFO", "informational": "INFO",
    "debug": "DEBUG", "fine": "DEBUG", "finer": "DEBUG", "dbg": "DEBUG",
    "trace": "TRACE", "finest": "TRACE", "verbose": "TRACE",
}
LEVEL_WORDS.update({w: SPELLINGS[w] for w in ("erro", "wrn", "debu", "fata", "pani", "dpanic")})  # Go's tags
ORDER = ("FATAL", "CRITICAL", "ERROR", "WARN", "NOTICE", "INFO", "DEBUG", "TRACE")
LEVEL_KEYS = frozenset({"level", "lvl", "severity", "loglevel", "log_level", "priority"})
_ANDROID = {"V": "TRACE", "D": "DEBUG", "I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL", "A": "FATAL"}
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
