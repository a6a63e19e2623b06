"""Facade of the C++ templater: lines in, a Templates object out (one pass over the document)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worker import _core
from worker.digest.levels import LEVEL_WORDS
from worker.digest.words import SEVERITY


@dataclass(frozen=True)
class VarSummary:
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


@dataclass(frozen=True)
class Template:
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
    num_values: np.ndarray            # [T] float64 numeric variable values, line by line
    num_lines: np.ndarray             # [T] int32 their line
    num_vars: np.ndarray              # [T] int32 their variable (template var_base + index)
    templates: tuple[Template, ...]   # in order of first appearance
    raw_templates: int                # before merging

    @property
    def nonblank(self) -> int:
        return int((self.line_template >= 0).sum())


def analyze(lines: list[str], *, merge: bool = True, top_values: int = 5) -> Templates:
    """The templates of a document given as lines (no line may hold a newline)."""
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    raw = _core.analyze_templates(data, protected_words=PROTECTED, severity=SEVERITY_ITEMS,
                                  top_values=top_values, merge=merge)
    templates = tuple(
        Template(i, pattern, count, first, last, base,
                 tuple(VarSummary(k, kind, occ, dist, capped, num, lo, med, hi, tuple(top))
                       for k, kind, occ, dist, capped, num, lo, med, hi, top in variables))
        for i, (pattern, count, first, last, base, variables) in enumerate(raw["templates"]))
    return Templates(lines, raw["line_template"], raw["line_severity"], raw["num_values"], raw["num_lines"],
                     raw["num_vars"], templates, int(raw["raw_templates"]))


SEVERITY_ITEMS = sorted(SEVERITY.items())
PROTECTED = sorted(set(SEVERITY) | set(LEVEL_WORDS))
