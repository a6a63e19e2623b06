"""Facade of the C++ templater: lines in, a Templates object out (one pass over the document).

One `_core.Templater` per process holds the word tables (built once); each document is one call
that releases the GIL. Its result is plain data: numpy arrays and tuples (Template and VarSummary
are NamedTuples the core makes itself, as tuple.__new__ does: no Python call per template; no per-line
Python objects).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from worker import _core
from worker.digest.levels import LEVEL_WORDS
from worker.digest.words import SEVERITY


class VarSummary(NamedTuple):
    key: str                 # key of key=value, or the constant word before it ("" if none)
    kind: str                # number | hex | ip | uuid | time | quoted | other | merged
    occurrences: int
    distinct: int
    distinct_capped: bool    # distinct is a lower bound
    numeric: int             # values that read as numbers
    min: float
    median: float
    max: float
    top: tuple[tuple[str, int], ...]  # commonest values, count descending


class Template(NamedTuple):
    index: int
    pattern: str             # constants and <n> <hex> <ip> <uuid> <ts> <q> <*> placeholders
    count: int
    first_line: int          # 0-based
    last_line: int           # 0-based
    var_base: int            # global id of vars[0] (Templates.num_vars)
    vars: tuple[VarSummary, ...]


@dataclass(frozen=True)
class Templates:
    lines: list[str]                  # the document's lines, as given
    line_template: np.ndarray         # [L] int32 template of each line, -1 for blank
    line_severity: np.ndarray         # [L] float32 highest severity word of each line
    line_clock: np.ndarray            # [L] uint8 1: the line may hold a timestamp (timeparse.span reads those)
    num_values: np.ndarray            # [T] float64 numeric variable values, line by line
    num_lines: np.ndarray             # [T] int32 their line
    num_vars: np.ndarray              # [T] int32 their variable (template var_base + index)
    num_z: np.ndarray                 # [T] float64 robust z of each value among its variable's (outliers.py)
    line_z: np.ndarray                # [L] float64 largest num_z of each line
    template_severity: np.ndarray     # [K] float32 highest severity word over each template's lines
    templates: tuple[Template, ...]   # in order of first appearance
    raw_templates: int                # before merging

    @property
    def nonblank(self) -> int:
        return int((self.line_template >= 0).sum())


SEVERITY_ITEMS = sorted(SEVERITY.items())
PROTECTED = sorted(set(SEVERITY) | set(LEVEL_WORDS))


@functools.lru_cache(maxsize=8)
def templater(merge: bool = True, top_values: int = 5) -> _core.Templater:
    """This process's templater (the word tables are hashed once, not per document)."""
    return _core.Templater(protected_words=PROTECTED, severity=SEVERITY_ITEMS, top_values=top_values, merge=merge)


def analyze(lines: list[str], *, merge: bool = True, top_values: int = 5) -> Templates:
    """The templates of a document given as lines (no line may hold a newline)."""
    return analyze_text("\n".join(lines), lines, merge=merge, top_values=top_values)


def analyze_text(text: str, lines: list[str] | None = None, *, merge: bool = True, top_values: int = 5) -> Templates:
    """analyze() of a document given whole (lines: text.split("\\n"), when the caller has them)."""
    raw = templater(merge, top_values).analyze(text.encode("utf-8", "surrogatepass"), template_type=Template,
                                               var_type=VarSummary)
    lt, ls, lc, nv, nl, nvar, nz, lz, ts, templates, raw_n = raw
    return Templates(text.split("\n") if lines is None else lines, lt, ls, lc, nv, nl, nvar, nz, lz, ts, templates,
                     int(raw_n))
