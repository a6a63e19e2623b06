"""Run a test file's own `__main__` under Triton's interpreter (TRITON_INTERPRET=1 must be set before triton is
imported, so the kernels run in a child process on the CPU) and read the JSON line it prints last; and, for that
child, the interpreter's fp32 -> e4m3 conversion made exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def run(path: str, *args: str, timeout: int = 600) -> dict:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, path, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def exact_e4m3_conversion() -> None:
    """Replace the interpreter's fp32 -> e4m3 conversion with torch's, round to nearest even with saturation (what
    the GPU's cvt.rn.satfinite does): Triton 3.7.1's interpreter rounds it wrongly (the mantissa's carry does not
    reach the exponent: 1.98 becomes 1.0, 500 becomes 256)."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._convert_float

    def exact(data, src, dst, rounding):
        if src == tl.float32 and dst == tl.float8e4nv:
            x = torch.from_numpy(np.frombuffer(data.tobytes(), dtype=np.float32).copy())
            return x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8).numpy().reshape(data.shape)
        return convert(data, src, dst, rounding)

    interpreter._convert_float = exact
