"""The level dictionary: every spelling a log header uses for a severity, normalized.

Normalized levels, worst first: FATAL, CRITICAL, ERROR, WARN, NOTICE, INFO, DEBUG, TRACE
(RANK gives 0..7). Spellings cover syslog (`emerg`, `alert`, `crit`, `err`, `warning`), Go
(`ERRO`, `EROR`, `WRN`, `DEBU`, `FATA`, `PANI`, `DPANIC`, `PANIC`), Java (`SEVERE`, `FINE`...), .NET/Windows
(`Information`, `Verbose`; Microsoft.Extensions.Logging's console `dbug`, `trce`, `fail`, `crit`), one-letter klog/logcat prefixes (`E`, `W`, `F`, `I`, `D`, `V`), RFC
5424/3164 PRI numbers, syslog severity digits (0-7), pino/bunyan numbers (10-60) and OTLP severityNumber.

The one level table of Ribbon: the digest's header and template readers, the shipper and OTLP
record readers (journald's PRIORITY, severityNumber), the windowing's syslog host reader (a level
word is no host) and `ribbon tail --min-severity` all read it.
"""

from __future__ import annotations

ORDER = ("FATAL", "CRITICAL", "ERROR", "WARN", "NOTICE", "INFO", "DEBUG", "TRACE")
RANK = {lv: i for i, lv in enumerate(ORDER)}
WARN_RANK = RANK["WARN"]          # a line of this rank or worse (lower) is a failure
FAILING = ORDER[: WARN_RANK + 1]  # the levels of a failure, worst first
# The level names as prose and patterns write them: the normalized names and their commonest spellings.
NAMES = frozenset(lv.lower() for lv in ORDER) | {"crit", "severe", "err", "warning"}

SPELLINGS = {
    "fatal": "FATAL", "fata": "FATAL", "panic": "FATAL", "pani": "FATAL", "dpanic": "FATAL", "emerg": "FATAL", "emergency": "FATAL", "ftl": "FATAL",
    "alert": "CRITICAL", "crit": "CRITICAL", "critical": "CRITICAL", "severe": "CRITICAL", "crt": "CRITICAL",
    "error": "ERROR", "err": "ERROR", "fail": "ERROR", "erro": "ERROR", "eror": "ERROR", "errors": None,
    "warn": "WARN", "warning": "WARN", "wrn": "WARN", "warng": "WARN",
    "notice": "NOTICE", "note": "NOTICE",
    "info": "INFO", "information": "INFO", "informational": "INFO", "inf": "INFO", "inform": "INFO",
    "debug": "DEBUG", "debu": "DEBUG", "dbg": "DEBUG", "fine": "DEBUG", "finer": "DEBUG", "debg": "DEBUG", "dbug": "DEBUG", "config": "DEBUG",
    "trace": "TRACE", "trac": "TRACE", "trce": "TRACE", "trc": "TRACE", "finest": "TRACE", "verbose": "TRACE", "vrb": "TRACE",
}
SPELLINGS = {k: v for k, v in SPELLINGS.items() if v is not None}
LETTERS = {"F": "FATAL", "A": "FATAL", "E": "ERROR", "W": "WARN", "N": "NOTICE", "I": "INFO", "D": "DEBUG",
           "V": "TRACE", "T": "TRACE"}
_PINO = {10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL"}   # pino/bunyan numbers
SYSLOG_SEVERITY = ("FATAL", "CRITICAL", "CRITICAL", "ERROR", "WARN", "NOTICE", "INFO", "DEBUG")  # PRI % 8


def level_word(word: str | None) -> str | None:
    """A header's level field ("ERRO", "[warn]", "Warning", "E", "<3>") as a normalized level, or None."""
    if not word:
        return None
    w = word.strip("[]<>:()").strip()
    if w.isdigit():
        n = int(w)
        return SYSLOG_SEVERITY[n] if n < 8 else _PINO.get(n)
    if len(w) == 1:
        return LETTERS.get(w.upper())
    return SPELLINGS.get(w.lower())


def from_pri(pri: str) -> str:
    """An RFC 3164/5424 PRI (facility * 8 + severity) as a level."""
    return SYSLOG_SEVERITY[int(pri) % 8]


def from_otlp(number: int) -> str | None:
    """An OTLP severityNumber (1-24) as a level, or None when unspecified (0)."""
    if not 1 <= number <= 24:
        return None
    return ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")[(number - 1) // 4]
