"""`python -m bench NAME ARGS...` runs `python -m bench.NAME ARGS...` (the same `main`, the same result).

The difference is what a child process imports. A process started by spawn or forkserver (the preprocessing
pool's, the engine process) first imports the parent's main module again, as `__mp_main__`, unless that
module is a package's `__main__`. Run as `python -m bench.e2e`, every pool process of the worker under test
imports bench.e2e and with it torch and transformers before it can take a batch; run from here, none does,
as with `ribbon run`, whose main module is the console script (docs/digest.md, the preprocessing pool).
"""

from __future__ import annotations

import importlib
import inspect
import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m bench NAME [ARGS...]  (NAME: a module of bench/ with a main, e.g. e2e)",
              file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"bench.{name}":
            raise
        print(f"python -m bench: no benchmark '{name}' (bench/{name}.py)", file=sys.stderr)
        return 2
    if not hasattr(module, "main"):
        print(f"python -m bench: bench/{name}.py has no main", file=sys.stderr)
        return 2
    sys.argv = [f"bench/{name}.py", *rest]  # a main without parameters reads its arguments here
    takes_argv = bool(inspect.signature(module.main).parameters)
    return (module.main(rest) if takes_argv else module.main()) or 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
