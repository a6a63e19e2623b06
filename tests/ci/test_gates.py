"""The lint gates of .ci/ (`make lint`) catch what their rules name and pass what they allow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[2] / ".ci"


@pytest.fixture
def gate(monkeypatch):
    """gate(name): a .ci/ script as a module; .ci/ on the path for this test, as `python .ci/check_paths.py` has it."""
    monkeypatch.syspath_prepend(str(CI))

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"ci_{name}", CI / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.mark.parametrize("text", [
    "The packer now decides when a bin is cut.", "stop strings are now found on the copy",
    "`ribbon produce` used to pass only producer_extra", "prefill_kernel (was `expand_kv`)",
    "measured before the option was removed", "the old path for that measurement", "formerly bench.py",
])
def test_history_phrases_are_caught(gate, text):
    assert gate("check_history").hits(text)


@pytest.mark.parametrize("text", [
    "the end offset of each partition now.", "build both now (no network)", "it invents a name now and then",
    "every call takes `now`", "the key is used to route", "from now on submit raises", "started now unless it runs",
])
def test_present_tense_uses_pass(gate, text):
    assert gate("check_history").hits(text) == []


def test_constructor_parameters_are_counted_as_ruff_counts_them(gate):
    import ast

    size = gate("check_size")
    tree = ast.parse("class A:\n    def __init__(self, a, b, c, d, e, f, *, g=1):\n        pass\n"
                     "class B:\n    def __init__(self, a, b, c, d, e, f):\n        pass\n"
                     "    def method(self, a, b, c, d, e, f, g, h):\n        pass\n")
    counts = {name: size.params(fn) for name, fn in size.constructors(tree)}
    assert counts == {"A.__init__": 7, "B.__init__": 6}  # self left out; methods other than __init__ not counted


def test_the_cpp_sources_are_measured_too(gate):
    size = gate("check_size")
    names = {p.relative_to(CI.parent).as_posix() for p in size.cpp_files()}
    assert {"ext/core/templater.cpp", "ext/core/templater.hpp", "ext/bindings/module.cpp"} <= names
    assert size.too_long("ext/core/x.cpp", "int x;\n" * 401).startswith("ext/core/x.cpp: 401 lines")
    assert size.too_long("ext/core/x.cpp", "int x;\n" * 400) is None


def test_paths_named_in_docstrings_and_comments_are_read(gate):
    paths, prose = gate("check_paths"), gate("prose")
    source = '"""Reads worker/no_such_module.py."""\n\nX = 1  # and bench/results/none_<machine>.json\n'
    lines = prose.prose_of_python(source)
    assert [p for _, p in paths.missing(lines)] == ["worker/no_such_module.py", "bench/results/none_*.json"]
    assert paths.missing([(1, "worker/errors.RibbonError and worker/kafka/broker.py")]) == []
