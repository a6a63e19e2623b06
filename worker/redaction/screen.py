"""The document screen: where the prefilter families (worker/redaction/rules.py: FAMILIES) can match in an
ASCII document, by Hyperscan (the `hyperscan` package: Vectorscan, BSD-3-Clause; its wheels are x86-64 only).

    document_screen(patterns) -> Screen | None  (None: hyperscan is not installed; RE2 reads every document)
    screen.spans(raw) -> [(start, end), ...] | None

The database holds FAMILIES' own expressions, one each, and reports every end of a match of each with its
leftmost start, so on ASCII bytes every match of RE2's union lies inside one of the merged spans
(Hyperscan's `\\s` also holds \\v, which can only add spans). The redaction pass runs the RE2 union over
those spans alone, none for most documents: RE2 builds its DFA state by state as a scan first meets them,
which costs most on a process's first documents. The union has no assertions, so its matches inside a span
are those it finds there in the whole text. Past _MOST reports (a document full of credential words) the
scan stops and answers None: RE2 reads the whole document. Text that is not ASCII always goes to RE2: in
UTF-8 RE2 counts `.` by characters and folds `k` and `s` with the Kelvin sign and the long s, Hyperscan's
byte mode does neither. The database compiles once per process (about 50 ms, at `install`, the worker's
start); each thread scans with its own scratch space, as Hyperscan requires.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable

try:
    import hyperscan
except ImportError:  # no wheel for this platform: the RE2 union reads every document
    hyperscan = None


_MOST = 64  # reports kept for one document; past them RE2 reads the whole document


def _keep(_id: int, start: int, end: int, _flags: int, got: list[tuple[int, int]]) -> bool:
    got.append((start, end))
    return len(got) > _MOST  # True halts the scan


class Screen:
    """A compiled multi-pattern database; shared by threads (each gets its own scratch)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        expressions = [p.encode() for p in patterns]
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(expressions=expressions, ids=list(range(len(expressions))),
                         flags=hyperscan.HS_FLAG_SOM_LEFTMOST)
        self._local = threading.local()

    def spans(self, raw: bytes) -> list[tuple[int, int]] | None:
        """Disjoint [start, end) byte ranges of `raw`, ascending, that hold every match of the patterns
        ([]: none matches); None: more than _MOST matches."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        got: list[tuple[int, int]] = []
        try:
            self._db.scan(raw, match_event_handler=_keep, context=got, scratch=scratch)
        except hyperscan.ScanTerminated:
            return None
        merged: list[tuple[int, int]] = []
        for s, e in sorted(got):
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        return merged


@functools.cache
def document_screen(patterns: tuple[str, ...]) -> Screen | None:
    """The process's screen of `patterns` (FAMILIES' expressions: one screen for every policy)."""
    return Screen(patterns) if hyperscan is not None else None
