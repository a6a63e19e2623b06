"""Severity words and their scores: the highlight scorer's table, shared with the templater."""

from __future__ import annotations

SEVERITY = {
    "panic": 6.0, "fatal": 6.0, "crit": 5.0, "critical": 5.0, "emerg": 5.0, "alert": 4.0,
    "segfault": 6.0, "crash": 5.0, "core": 2.0, "dump": 2.0, "oom": 5.0, "killed": 4.0,
    "error": 4.0, "err": 3.0, "fail": 4.0, "failed": 4.0, "failure": 4.0, "exception": 4.0,
    "timeout": 3.5, "timed": 2.0, "refused": 3.0, "reset": 2.0, "unreachable": 3.5, "down": 3.0,
    "drop": 2.5, "dropped": 2.5, "lost": 3.0, "reject": 3.0, "rejected": 3.0, "denied": 3.0,
    "warn": 1.5, "warning": 1.5, "retry": 1.0, "retrying": 1.0, "degraded": 2.5, "overload": 3.0,
    "abort": 3.0, "aborted": 3.0, "restart": 2.0, "restarted": 2.0, "alarm": 3.0,
}
SEVERE = 3.0  # a line with a word scoring this much or more stays verbatim in the compacted text
