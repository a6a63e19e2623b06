"""Events of one key's lines, as Fluent Bit's multiline parser joins them: a record that continues the
event before it (worker/multiline.py: `joins`) is appended to it with a newline, never starts an event
of its own, and is never separated from its first line when a window closes on its line or byte count.
"""

from __future__ import annotations

from worker.multiline import joins


class Joiner:
    """Joins a stream of one key's lines into events; pure, no clock.

    `add(line)` returns True when the line continued the open event, False when it started one;
    `append(line)` takes a line without telling (the windower's per-record path): the lines it took are
    sorted into events only when `event_count` or `events` is read, in one pass of `joins` over them.
    Lines are kept once, in order, with the index of each event's first line:
    joining is one `"\n".join` at `text()` (linear in the text), never a growing string per
    continuation line. `lines` counts the records taken in, `event_count` the events."""

    __slots__ = ("enabled", "_lines", "_starts", "_sorted")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lines: list[str] = []
        self._starts: list[int] = []  # index in _lines of each event's first line, among _lines[:_sorted]
        self._sorted = 0              # lines sorted into events so far

    @property
    def lines(self) -> int:
        return len(self._lines)

    @property
    def event_count(self) -> int:
        self._sort()
        return len(self._starts)

    @property
    def events(self) -> list[str]:
        """The joined events, in order (built on each call: for reports and tests, not the hot path)."""
        self._sort()
        ends = [*self._starts[1:], len(self._lines)]
        return ["\n".join(self._lines[a:b]) for a, b in zip(self._starts, ends)]

    def add(self, line: str) -> bool:
        self._sort()
        joined = self.enabled and bool(self._starts) and joins(line)
        if not joined:
            self._starts.append(len(self._lines))
        self._lines.append(line)
        self._sorted += 1
        return joined

    def append(self, line: str) -> None:
        self._lines.append(line)

    def extend(self, lines: list[str]) -> None:
        """`append` of each line, in order."""
        self._lines.extend(lines)

    def _sort(self) -> None:
        """The event starts among the lines `append` took (the first line always starts one)."""
        lines, i = self._lines, self._sorted
        if i == len(lines):
            return
        if not self.enabled:
            self._starts.extend(range(i, len(lines)))
        else:
            if not self._starts:
                self._starts.append(i)
                i += 1
            self._starts.extend(j for j, joined in enumerate(map(joins, lines[i:]), i) if not joined)
        self._sorted = len(lines)

    def text(self) -> str:
        """Events are joined by a newline and so are an event's lines: the text is every line, joined once."""
        return "\n".join(self._lines)
