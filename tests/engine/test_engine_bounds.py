"""The declared lower bounds of the engine's model libraries really run the engine.

pyproject.toml declares `transformers>=X` and `tokenizers>=Y`; this test installs exactly those
versions (and the huggingface-hub floor that transformers X itself declares) into a temporary
folder, puts it first on the path of a fresh interpreter, and runs the engine there on a tiny
random checkpoint: packed greedy output must equal that transformers' own `generate`. Cost: one
pip install of three wheels (cached by pip after the first run) and a CPU run of a 2-layer model.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUB_FOR = {"4.56.0": "0.34.0"}  # transformers 4.56.0 declares huggingface-hub>=0.34.0,<1.0
REQUESTS = ["requests", "urllib3", "idna", "charset-normalizer", "certifi"]  # hub < 1.0 imports requests

NETWORK_ERRORS = ("NewConnectionError", "Failed to establish", "Temporary failure in name resolution", "ProxyError",
                  "Network is unreachable", "ConnectTimeoutError")

SCRIPT = r"""
import random, sys, torch, transformers, tokenizers
from transformers import AutoModelForCausalLM
from worker.engine.loader import load_engine
from worker.engine.tiny import make_tiny_checkpoint
from worker.config.settings import ModelRun

print("versions", transformers.__version__, tokenizers.__version__)
path = make_tiny_checkpoint(sys.argv[1], "qwen2", seed=2)
eng = load_engine(ModelRun(path=str(path), max_new_tokens=5))
hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
assert next(hf.parameters()).dtype == torch.float32
rng = random.Random(0)
docs = [[rng.randrange(4, hf.config.vocab_size) for _ in range(rng.randint(1, 30))] for _ in range(4)]
cu = [0]
for d in docs:
    cu.append(cu[-1] + len(d))
outs = eng.generate(eng.stage(torch.tensor(sum(docs, []), dtype=torch.int32), torch.tensor(cu, dtype=torch.int32),
                              max(map(len, docs))))
for d, o in zip(docs, outs):
    ref = hf.generate(torch.tensor([d]), max_new_tokens=5, do_sample=False, pad_token_id=0,
                      attention_mask=torch.ones(1, len(d), dtype=torch.long))[0, len(d):].tolist()
    ref = ref[:-1] if ref and ref[-1] in eng.eos_ids else ref
    if ref != o.token_ids:
        sys.exit(f"differs: {ref} vs {o.token_ids}")
print("ENGINE OK", eng.backend)
"""


def _lower_bound(name: str) -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(rf'"{re.escape(name)}>=([0-9][0-9.]*)"', text)
    if m is None:
        raise AssertionError(f"pyproject.toml declares no lower bound for {name}")
    return m.group(1)


def _full(version: str) -> str:
    return version if version.count(".") >= 2 else version + ".0"


def test_declared_lower_bounds_cover_the_hub_table():
    assert _full(_lower_bound("transformers")) in HUB_FOR, "add the hub floor of the new transformers bound"


def test_engine_runs_at_the_declared_lower_bounds(tmp_path):
    tf, tok = _full(_lower_bound("transformers")), _full(_lower_bound("tokenizers"))
    target = tmp_path / "site"
    pins = [f"transformers=={tf}", f"tokenizers=={tok}", f"huggingface-hub=={HUB_FOR[tf]}", *REQUESTS]
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:",
                          "--target", str(target), *pins], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0 and any(s in pip.stderr for s in NETWORK_ERRORS):
        pytest.skip(f"package index unreachable, lower bounds not checked: {pip.stderr.strip()[-200:]}")
    assert pip.returncode == 0, pip.stderr[-800:]  # a declared bound that does not exist is a failure
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)]), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "ckpt")], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-500:] + run.stderr[-1500:]
    assert f"versions {tf} {tok}" in run.stdout  # the bounds, not the venv's newer versions, ran
    assert "ENGINE OK reference" in run.stdout
