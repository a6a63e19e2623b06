"""The document screen: whether any prefilter family (worker/redaction/rules.py: FAMILIES) matches anywhere
in an ASCII document, by Hyperscan (Intel, BSD-3-Clause; the `hyperscan` package's wheels are x86-64 only).

    document_screen(patterns) -> Screen | None  (None: hyperscan is not installed; the RE2 union reads every document)
    screen.hits(raw) -> bool             (False: no family matches anywhere in `raw`)

The database holds FAMILIES' own expressions, one each, so on ASCII bytes it matches where RE2's union does
(Hyperscan's `\\s` also holds \\v, which can only add matches). A document it clears has no prefilter hit:
the redaction pass skips it without the RE2 scan, whose lazily built DFA costs most on a process's first
documents; a document it does not clear is read by the RE2 union as before, so the redactions are the same.
Text that is not ASCII always goes to RE2: in UTF-8 RE2 counts `.` by characters and folds case beyond ASCII
(`(?i:k)` holds the Kelvin sign), Hyperscan's byte mode does neither.
The database compiles once per process (tens of milliseconds, at `install`, the worker's start); each thread
scans with its own scratch space, as Hyperscan requires.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable

try:
    import hyperscan
except ImportError:  # no wheel for this platform: the RE2 union reads every document
    hyperscan = None


def _stop(*_) -> bool:
    return True  # the first match answers the question: halt the scan


class Screen:
    """A compiled multi-pattern database; shared by threads (each gets its own scratch)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        expressions = [p.encode() for p in patterns]
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(expressions=expressions, ids=list(range(len(expressions))),
                         flags=hyperscan.HS_FLAG_SINGLEMATCH)
        self._local = threading.local()

    def hits(self, raw: bytes) -> bool:
        """True when some pattern matches somewhere in `raw`."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        try:
            self._db.scan(raw, match_event_handler=_stop, scratch=scratch)
        except hyperscan.ScanTerminated:
            return True
        return False


@functools.cache
def document_screen(patterns: tuple[str, ...]) -> Screen | None:
    """The process's screen of `patterns` (FAMILIES' expressions: one screen for every policy)."""
    return Screen(patterns) if hyperscan is not None else None
