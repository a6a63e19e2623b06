"""Where benchmark scripts put their figures: one JSON per run under bench/results/ (or --out)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save(path: str | Path, result: dict) -> None:
    """Write `result` as indented JSON at `path` (its folder made if missing) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
