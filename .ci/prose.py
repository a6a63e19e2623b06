"""The prose of the repository that the gates read: the docs, and the docstrings and comments of the Python.

`docs()` lists README.md, bench/RESULTS.md and docs/*.md; `python_files()` the Python under worker/,
bench/, tests/ and .ci/; `prose_of_python(source)` gives each comment and each docstring line with
its line number.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "bench/RESULTS.md", "docs/*.md")
CODE = ("worker", "bench", "tests", ".ci")


def docs() -> list[Path]:
    return [p for pattern in DOCS for p in sorted(ROOT.glob(pattern))]


def python_files() -> list[Path]:
    return [p for top in CODE for p in sorted((ROOT / top).rglob("*.py")) if "__pycache__" not in p.parts]


def prose_of_python(source: str, comments: bool = True) -> list[tuple[int, str]]:
    """(line, text) of each docstring line of a module, its classes and functions, and of each comment."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    if comments:
        out += [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    return sorted(out)
