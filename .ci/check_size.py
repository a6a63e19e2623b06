"""Files stay small and constructors take few parameters (`make lint`).

The rules: no Python file under worker/, bench/, tests/ or .ci/, and no C++ file under ext/ (`.cpp`,
`.hpp`), is longer than MAX_LINES lines, and no `__init__` (or `__new__`) takes more than MAX_PARAMS
parameters besides `self`/`cls` (*args and **kwargs count one each). A part that needs more takes a frozen config of the fields it uses.
Dataclasses are their own frozen configs: their fields are not counted. ruff's PLR0913 (max-args)
counts every function, kernels and command handlers included, so this check keeps to constructors,
counting as PLR0913 does. Exit 1 naming each file and constructor over its limit.
"""

from __future__ import annotations

import ast
import sys

from prose import ROOT, python_files

MAX_LINES = 400
MAX_PARAMS = 6
CPP = ("ext", ("*.cpp", "*.hpp", "*.h", "*.cc"))


def cpp_files() -> list:
    top, patterns = CPP
    return sorted(p for pattern in patterns for p in (ROOT / top).rglob(pattern))


def too_long(rel: str, text: str) -> str | None:
    """The line naming a file over MAX_LINES lines, or None."""
    lines = len(text.splitlines())
    if lines > MAX_LINES:
        return f"{rel}: {lines} lines, more than {MAX_LINES}: split it by what each part owns"
    return None


def params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters of `fn` besides its first (`self` or `cls`)."""
    a = fn.args
    named = [*a.posonlyargs, *a.args][1:] + a.kwonlyargs
    return len(named) + (a.vararg is not None) + (a.kwarg is not None)


def constructors(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            out += [(f"{cls.name}.{fn.name}", fn) for fn in cls.body
                    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name in ("__init__", "__new__")]
    return out


def problems() -> list[str]:
    out = [line for path in cpp_files()
           if (line := too_long(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")))]
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if line := too_long(rel, text):
            out.append(line)
        for name, fn in constructors(ast.parse(text)):
            n = params(fn)
            if n > MAX_PARAMS:
                out.append(f"{rel}:{fn.lineno}: {name} takes {n} parameters, more than {MAX_PARAMS}: "
                           "pass a frozen config of the fields it uses")
    return out


def main() -> int:
    bad = problems()
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
