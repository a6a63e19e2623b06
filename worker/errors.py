"""Ribbon's exception base: every error Ribbon raises on purpose is a `RibbonError`.

Each error class lives with the code that raises it and keeps the builtin base its callers catch
(`ValueError`, `RuntimeError`); `except RibbonError` catches all of them and nothing of a library's.
This module imports nothing: every package may import it (the lowest layer in pyproject.toml).
"""

from __future__ import annotations


class RibbonError(Exception):
    """The base of Ribbon's own errors."""
