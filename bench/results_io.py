"""Where benchmark scripts put their figures: one JSON per run under bench/results/ (or --out)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine_name(device: str = "cpu") -> str:
    """The machine as result files name it (`<benchmark>_<machine>.json`): the accelerator's model for a
    CUDA device ("NVIDIA H200" -> "h200"), else "cpu"."""
    if device.startswith("cuda"):
        import torch  # noqa: PLC0415 - only a CUDA run asks, and torch is heavy to import

        if torch.cuda.is_available():
            return torch.cuda.get_device_name().split()[-1].lower()
    return "cpu"


def save(path: str | Path, result: dict) -> None:
    """Write `result` as indented JSON at `path` (its folder made if missing) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
