"""Every exception class Ribbon defines is a RibbonError (worker/errors.py), and keeps the builtin base its
callers catch."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from worker.errors import RibbonError

WORKER = Path(__file__).resolve().parents[1] / "worker"


def _defined_errors() -> list[tuple[str, str]]:
    """(module, class) of each class under worker/ whose name or a base's name says it is an error."""
    out = []
    for path in sorted(WORKER.rglob("*.py")):
        module = ".".join(path.relative_to(WORKER.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                if any(b.endswith(("Error", "Exception")) or b in ("BadMessage",) for b in bases):
                    out.append((module, node.name))
    return out


ERRORS = _defined_errors()


def test_the_scan_finds_the_error_classes():
    names = {c for _, c in ERRORS}
    assert {"BadMessage", "BrokerError", "StartupError", "SettingsError", "EngineSettingError",
            "PreprocessStalled", "EngineStopped"} <= names


@pytest.mark.parametrize(("module", "name"), ERRORS, ids=[f"{m}.{c}" for m, c in ERRORS])
def test_each_error_class_is_a_ribbon_error(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, RibbonError), f"{module}.{name} does not derive from worker.errors.RibbonError"


def test_a_ribbon_error_keeps_the_builtin_base_its_callers_catch():
    from worker.engine.errors import EngineSettingError
    from worker.kafka.broker import BrokerError

    with pytest.raises(ValueError):
        raise EngineSettingError("model.dtype", "bad")
    with pytest.raises(RuntimeError):
        raise BrokerError("down")
    assert not issubclass(KeyError, RibbonError)
