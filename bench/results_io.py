"""Where benchmark scripts put their figures: one JSON per run under bench/results/ (or --out)."""

from __future__ import annotations

import json
import shlex
import sys
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


def command_line(module: str, argv: list[str] | None) -> str:
    """The command a result records: `python -m <module>` and its arguments (argv None: this process's)."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def save(path: str | Path, result: dict) -> None:
    """Write `result` as indented JSON at `path` (its folder made if missing) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
