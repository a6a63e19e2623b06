"""A clock the tests set by hand: policy code takes its clock injected (STYLE.md)."""

from __future__ import annotations


class Clock:
    """Reads `t`, which the test moves; starts at 1000.0 s."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
