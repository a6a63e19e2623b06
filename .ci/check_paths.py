"""Every repository path that the docs and the docstrings and comments of the Python name exists; every
file in bench/results/ is indexed.

The prose read is README.md, bench/RESULTS.md, docs/*.md and each docstring and comment under worker/,
bench/, tests/ and .ci/ (prose.py). A path is a word starting with a top-level folder of the repository
(`worker/`, `bench/`, ...; brace forms such as `x_{on,off}.json` expanded, a `<placeholder>` matching
anything, `dir/module.name` naming a name in dir/module.py); a bare result file name
(`<benchmark>_<machine>.json`) is looked up in bench/results/. bench/results/ holds only files named in bench/RESULTS.md, under
RESULTS_LIMIT bytes in all. Exit 1 naming each problem.
"""

from __future__ import annotations

import itertools
import re
import sys

from prose import ROOT, docs, prose_of_python, python_files

RESULTS_LIMIT = 3_000_000
TOP = ("worker", "bench", "tests", "docs", "deploy", "config", "schemas", "ext", ".ci")
PATH = re.compile(r"(?<![\w./$-])((?:%s)/[\w.{},*/-]*[\w}*/])" % "|".join(re.escape(t) for t in TOP))
SUFFIXES = {"py", "md", "json", "png", "toml", "yml", "yaml", "txt", "cpp", "hpp", "sh", "pyi", "csv"}
PLACEHOLDER = re.compile(r"<[\w-]+>")
RESULT = re.compile(r"(?<![\w./${,-])([\w.{},-]+_(?:cpu|h200|h200host)(?:_[\w{},-]+)?\.(?:json|png))\b")


def expand(word: str) -> list[str]:
    parts = re.split(r"\{([^{}]*)\}", word)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def exists(path: str) -> bool:
    """A file or folder, a glob that matches one, or `dir/module.Name` naming a name in `dir/module.py`."""
    if "*" in path:
        try:
            return any(ROOT.glob(path))
        except ValueError:  # a pattern pathlib does not take (`**.py`): not a path
            return True
    if (ROOT / path).exists():
        return True
    stem, dot, name = path.rpartition(".")
    return bool(dot) and name.isidentifier() and name not in SUFFIXES and (ROOT / f"{stem}.py").is_file()


def missing(lines) -> list[tuple[int, str]]:
    """(line, path) of each path named in `lines` ((line, text) pairs) that does not exist."""
    out = []
    for n, line in lines:
        line = PLACEHOLDER.sub("*", line)  # `x_<machine>.json`: any machine
        for word in PATH.findall(line):
            if "." not in word and word.count("/") < 2 and not word.endswith("/"):
                continue  # `docs/s` is a unit, not a path
            out += [(n, p) for p in expand(word.rstrip(".")) if not exists(p)]
        for word in RESULT.findall(line):
            out += [(n, p) for p in expand(word) if not (ROOT / "bench" / "results" / p).exists()
                    and not exists(p)]
    return out


def main() -> int:
    bad = [(f, n, p) for f in docs() for n, p in missing(enumerate(f.read_text(encoding="utf-8").splitlines(), 1))]
    bad += [(f, n, p) for f in python_files() for n, p in missing(prose_of_python(f.read_text(encoding="utf-8")))]
    for f, n, p in bad:
        print(f"{f.relative_to(ROOT)}:{n}: no such path: {p}")
    results = sorted((ROOT / "bench" / "results").iterdir())
    index = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    unindexed = [r.name for r in results if f"`{r.name}`" not in index]
    for name in unindexed:
        print(f"bench/results/{name}: not named in bench/RESULTS.md")
    size = sum(r.stat().st_size for r in results)
    if size > RESULTS_LIMIT:
        print(f"bench/results/: {size:,} bytes, more than {RESULTS_LIMIT:,}")
    return 1 if bad or unindexed or size > RESULTS_LIMIT else 0


if __name__ == "__main__":
    sys.exit(main())
