"""Run a test file's own `__main__` under Triton's interpreter (TRITON_INTERPRET=1 must be set before triton is
imported, so the kernels run in a child process on the CPU) and read the JSON line it prints last."""

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
