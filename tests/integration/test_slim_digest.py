"""The slim digest install: `ribbon run --mode digest` with none of the model stack importable.

A `sitecustomize` on the worker's PYTHONPATH makes torch, transformers, tokenizers, gguf, accelerate,
safetensors, huggingface_hub and triton unimportable in the worker and in every process it starts (the
preprocessing pool), as on an install of `ribbon-worker` without the `[model]` extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import orjson
from helpers import consume_all, produce, start_worker, topics, worker_env

MODEL_STACK = ("torch", "transformers", "tokenizers", "gguf", "accelerate", "safetensors", "huggingface_hub",
               "triton")
BLOCKER = f'''import importlib.abc, sys
class _NoModelStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {MODEL_STACK!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (no [model] extra)", name=name)
sys.meta_path.insert(0, _NoModelStack())
'''


def test_digest_mode_runs_without_the_model_stack(broker, new_topic, tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    t = topics(new_topic)
    values = [orjson.dumps({"text": f"2024-05-01T12:00:0{i}Z ERROR disk {i} full\n2024-05-01T12:00:09Z INFO ok"})
              for i in range(5)]
    values.append(b'{"message": "sshd[1]: Failed password for root", "host": "web-1"}')
    produce(broker.bootstrap, t["input_topic"], values)
    env = worker_env(broker.bootstrap, "/no/model/needed", group=f"g-{uuid.uuid4().hex[:8]}",
                     RIBBON_MODEL__MODE="digest", RIBBON_PIPELINE__PREPROCESS_PROCESSES="1", **t)
    env["PYTHONPATH"] = str(tmp_path / "site")
    probe = subprocess.run([sys.executable, "-c", "import transformers"], env=env, capture_output=True, text=True,
                           check=False)
    assert probe.returncode == 1 and "no [model] extra" in probe.stderr   # the blocker is in effect
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        got = consume_all(broker.bootstrap, t["output_topic"], len(values), timeout_s=180, isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    log = (tmp_path / "worker.log").read_text()
    assert rc == 0, log[-3000:]
    outs = [orjson.loads(m.value()) for m in got]
    assert len(outs) == len(values) and {o["mode"] for o in outs} == {"digest"}
    assert any(o["source"] == "web-1" for o in outs)
    assert "no [model] extra" not in log


def test_a_model_without_the_model_stack_is_one_line_naming_the_extra(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    res = subprocess.run([sys.executable, "-m", "worker", "run", "--mode", "generative", "--model", "/nowhere"],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "model.mode" in line and "ribbon-worker[model]" in line
