"""The engine's one error type for settings it cannot honour on this machine."""

from __future__ import annotations

from worker.errors import RibbonError


class EngineSettingError(RibbonError, ValueError):
    """A model setting the engine cannot honour here; `setting` names it (the worker turns this into
    its one-line settings error, exit code 2)."""

    def __init__(self, setting: str, message: str, allowed: str = ""):
        self.setting, self.message, self.allowed = setting, message, allowed
        super().__init__(f"{setting}: {message}")
