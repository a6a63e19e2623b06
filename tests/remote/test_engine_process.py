"""The model in its own process (engine.process = on), on CPU with the tiny model through the real loader,
against the embedded broker: exactly-once through the engine process; the engine process killed
mid-run stops the worker non-zero, and a restarted worker delivers every summary (any repeat
identical: Tansu shows aborted records); SIGTERM stops the worker and its engine process."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import orjson
from helpers import by_id, committed_equals_end, mixed_docs, produce, read_until_ids, start_worker, topics, worker_env

from worker.demo.samples import document

PROCESS = {"RIBBON_ENGINE__PROCESS": "on"}


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def engine_child(proc, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        kids = [k for k in children(proc.pid) if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
        if kids:
            return kids[0]
        time.sleep(0.1)
    raise AssertionError("the worker started no engine process")


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_engine_process_exactly_once_killed_restarted_and_stopped(broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = worker_env(broker.bootstrap, tiny_model, group=group, **t, **PROCESS)
    log = tmp_path / "worker.log"
    first = mixed_docs(200, seed=5)
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in first])
    proc = start_worker(env, log)
    child = engine_child(proc)
    ids = {d["id"] for d in first}
    outs = by_id(read_until_ids(broker.bootstrap, t["output_topic"], ids, timeout_s=120))
    assert set(outs) == ids and all(len(c) == 1 for c in outs.values()), log.read_text()[-3000:]  # exactly once

    more = [document(i, n_lines=1 + i % 3, seed=6) for i in range(200, 900)]
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in more])
    time.sleep(1.0)  # mid-run: the engine process is under bins
    os.kill(child, signal.SIGKILL)
    assert proc.wait(60) != 0, log.read_text()[-3000:]  # the engine's failure path: exit non-zero
    assert b"engine process ended" in log.read_bytes()

    proc = start_worker(env, log)
    child = engine_child(proc)
    ids |= {d["id"] for d in more}
    outs = by_id(read_until_ids(broker.bootstrap, t["output_topic"], ids, timeout_s=150))
    assert set(outs) == ids, f"{len(ids - set(outs))} inputs without a summary"
    for doc_id, copies in outs.items():
        assert all({**c, "timing_ms": None} == {**copies[0], "timing_ms": None} for c in copies), doc_id
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, log.read_text()[-3000:]
    deadline = time.monotonic() + 10
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(child)  # SIGTERM stops both
    committed, ends = committed_equals_end(broker.bootstrap, group, t["input_topic"], 3)
    assert committed == ends


def test_a_setting_the_engine_process_cannot_honour_is_one_settings_error(tiny_model):
    """The start failure travels back from the engine process as the setting it names (one line, exit 2)."""
    import pytest

    from worker.pipeline.app import build_parts
    from worker.config.settings import SettingsError, load_settings

    settings = load_settings(environ={}, overrides={
        "engine.process": "on", "engine.device": "cpu", "engine.attention": "varlen", "model.path": tiny_model,
        "batching.token_budget": 4096, "log_level": "ERROR"})
    with pytest.raises(SettingsError) as err:
        build_parts(settings)
    assert err.value.setting == "engine.attention" and "CUDA" in err.value.message


def test_the_cache_folder_is_ribbon_cache_dir(tmp_path, monkeypatch):
    from pathlib import Path

    from worker.config.model import cache_root

    monkeypatch.setenv("RIBBON_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root({}) == Path.home() / ".cache" / "ribbon"


def test_the_stop_signal_ends_the_wait_for_a_starting_engine_process(tiny_model):
    import threading

    import pytest

    from worker.remote.process import EngineProcess, EngineSpec, EngineStopped
    from worker.config.settings import load_settings, model_run

    model = model_run(load_settings(environ={}, overrides={"model.path": tiny_model, "engine.device": "cpu"}))
    stop = threading.Event()
    stop.set()
    t0 = time.monotonic()
    with pytest.raises(EngineStopped):
        EngineProcess(EngineSpec(model=model, budget=4096, max_seqs=8, cache_dir="/nonexistent"), stop=stop)
    assert time.monotonic() - t0 < 30


def test_model_process_auto_is_on_with_cuda_only():
    from worker.remote.process import want_process
    from worker.config.settings import load_settings, model_run

    def model(**kv):
        return model_run(load_settings(environ={}, overrides={f"engine.{k}": v for k, v in kv.items()}))

    assert not want_process(model(device="cpu")) and want_process(model(device="cuda:1"))
    assert want_process(model(device="cpu", process="on")) and not want_process(model(device="cuda", process="off"))
    import torch

    assert want_process(model()) == torch.cuda.is_available()  # auto device: asked through NVML


def test_close_returns_in_its_time_while_a_bin_is_stuck_in_the_pipe_of_a_stopped_engine_process(tiny_model, tmp_path):
    import contextlib
    import threading

    import numpy as np

    from worker.config.settings import load_settings, model_run
    from worker.remote.process import EngineProcess, EngineProcessError, EngineSpec

    model = model_run(load_settings(environ={}, overrides={"model.path": tiny_model, "engine.device": "cpu"}))
    eng = EngineProcess(EngineSpec(model=model, budget=4096, max_seqs=8, cache_dir=str(tmp_path)))
    pid = eng.proc.pid
    os.kill(pid, signal.SIGSTOP)  # it reads nothing more: a bin larger than the pipe blocks its write
    try:
        big = np.zeros(1 << 20, dtype=np.int32)  # [T] int32, 4 MiB: far more than a pipe holds

        def write() -> None:
            with contextlib.suppress(EngineProcessError):  # the write fails once the process is killed
                eng.send_bin(big, np.array([0, big.size], dtype=np.int32), big.size, [0], [True])

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + 30
        while not eng._send_lock.locked() and time.monotonic() < deadline:  # the write under way holds the lock
            time.sleep(0.01)
        assert eng._send_lock.locked() and writer.is_alive()
        closed = threading.Event()
        threading.Thread(target=lambda: (eng.close(timeout_s=1.0), closed.set()), daemon=True).start()
        assert closed.wait(60), "close() waited on the blocked write"
        eng.proc.join(60)  # killed (a stopped process never ends by itself); its exit may outlast close's
        assert not eng.proc.is_alive()  # 5 s join on a loaded machine (a large address space to tear down)
        writer.join(30)
        assert not writer.is_alive()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        if eng.proc.is_alive():
            eng.proc.kill()
