"""Every repository path that README.md, bench/RESULTS.md and docs/ name exists; every file in bench/results/ is indexed.

A path is a word starting with a top-level folder of the repository (`worker/`, `bench/`, ...; brace
forms such as `x_{on,off}.json` expanded); a bare result file name (`<benchmark>_<machine>.json`) is
looked up in bench/results/. bench/results/ holds only files named in bench/RESULTS.md, under
RESULTS_LIMIT bytes in all. Exit 1 naming each problem.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_LIMIT = 3_000_000
TOP = ("worker", "bench", "tests", "docs", "deploy", "config", "schemas", "ext", ".ci")
PATH = re.compile(r"(?<![\w./$-])((?:%s)/[\w.{},*/-]*[\w}*/])" % "|".join(re.escape(t) for t in TOP))
RESULT = re.compile(r"(?<![\w./${,-])([\w.{},-]+_(?:cpu|h200|h200host)(?:_[\w{},-]+)?\.(?:json|png))\b")


def expand(word: str) -> list[str]:
    parts = re.split(r"\{([^{}]*)\}", word)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def exists(path: str) -> bool:
    if "*" in path:
        try:
            return any(ROOT.glob(path))
        except ValueError:  # a pattern pathlib does not take (`**.py`): not a path
            return True
    return (ROOT / path).exists()


def missing(text: str) -> list[tuple[int, str]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for word in PATH.findall(line):
            if "." not in word and word.count("/") < 2 and not word.endswith("/"):
                continue  # `docs/s` is a unit, not a path
            out += [(n, p) for p in expand(word.rstrip(".")) if not exists(p)]
        for word in RESULT.findall(line):
            out += [(n, p) for p in expand(word) if not (ROOT / "bench" / "results" / p).exists()
                    and not exists(p)]
    return out


def main() -> int:
    files = [ROOT / "README.md", ROOT / "bench" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = [(f, n, p) for f in files for n, p in missing(f.read_text(encoding="utf-8"))]
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
