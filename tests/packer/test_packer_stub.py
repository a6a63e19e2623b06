"""The hand-written stub worker/_core.pyi must match the compiled module."""

import ast
import inspect
import re
from pathlib import Path

import worker
from worker import _core

STUB = Path(worker.__file__).with_name("_core.pyi")
SIG = re.compile(r"^\w+\((?P<params>.*)\) -> (?P<ret>.+)$")


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def _params_from_stub(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args if p.arg != "self"]
    if a.kwonlyargs:
        names += ["*"] + [p.arg for p in a.kwonlyargs]
    defaults = len(a.defaults) + sum(d is not None for d in a.kw_defaults)
    return names + [f"defaults={defaults}"]


def _split_top(params: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _params_from_runtime(obj: object) -> list[str]:
    first = (obj.__doc__ or "").strip().splitlines()[0]
    m = SIG.match(first)
    assert m, f"no pybind11 signature in {first!r}"
    names, defaults = [], 0
    for p in _split_top(m["params"]):
        name = p.split(":")[0].strip()
        if name == "self":
            continue
        defaults += "=" in p
        names.append(name)
    return names + [f"defaults={defaults}"]


def _runtime_members(cls: type) -> set[str]:
    """Public members plus __init__/__len__ where the module defines them (not the
    placeholder __init__ pybind11 gives a class without a constructor)."""
    names = {n for n in vars(cls) if not n.startswith("_") or n == "__len__"}
    if SIG.match((getattr(cls.__init__, "__doc__", None) or "").strip().split("\n")[0]):
        names.add("__init__")
    return names


def test_stub_declares_exactly_the_runtime_names():
    tree = _stub_tree()
    declared = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    runtime = {n for n in dir(_core) if not n.startswith("__")} | {"__version__"}
    assert declared == runtime


def test_stub_classes_have_the_runtime_members_with_their_parameters():
    for node in _stub_tree().body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(_core, node.name)
        stub_members = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        assert set(stub_members) == _runtime_members(cls), node.name
        for name, fn in stub_members.items():
            attr = inspect.getattr_static(cls, name)
            if isinstance(attr, property):
                assert any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list), name
                continue
            assert _params_from_stub(fn) == _params_from_runtime(attr), f"{node.name}.{name}"


def test_stub_functions_match_runtime_parameters():
    for node in _stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            assert _params_from_stub(node) == _params_from_runtime(getattr(_core, node.name)), node.name
