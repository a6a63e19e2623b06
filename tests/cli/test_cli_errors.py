"""The bad-invocation table: each case is one line on stderr, no traceback, and its documented exit code.

The commands run as an operator runs them (a subprocess of `python -m worker`),
all at once, so librdkafka's own output and Python's tracebacks would show.
Exit codes: docs/operating.md, "Exit codes" (worker/config/errors.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from worker.kafka.broker import free_port

# (case, argv, exit code, words the one line must hold)
CASES = [
    ("missing model path", ["run", "--model", "/no/such/model", "--bootstrap-servers", "127.0.0.1:9"], 2,
     ["model.path", "RIBBON_MODEL__PATH", "/no/such/model"]),
    ("model folder that does not load", ["run", "--model", "{badmodel}", "--device", "cpu",
                                         "--bootstrap-servers", "127.0.0.1:{closed}"], 2,
     ["model.path", "RIBBON_MODEL__PATH", "cannot load"]),
    ("demo with a missing model", ["demo", "--model", "/no/such/model"], 2, ["model.path", "RIBBON_MODEL__PATH"]),
    ("autotune with a missing model", ["autotune", "--model", "/no/such/model"], 2, ["model.path"]),
    ("hub id not cached, downloads off", ["run", "--model", "nobody/no-such-model"], 2,
     ["model.path", "RIBBON_MODEL__PATH", "local Hugging Face cache"]),
    ("malformed bootstrap address", ["run", "--bootstrap-servers", "localhost"], 2,
     ["kafka.bootstrap_servers", "RIBBON_KAFKA__BOOTSTRAP_SERVERS", "host:port"]),
    ("bootstrap port out of range", ["run", "--bootstrap-servers", "kafka:99999"], 2,
     ["kafka.bootstrap_servers", "RIBBON_KAFKA__BOOTSTRAP_SERVERS"]),
    ("unreachable broker (produce)", ["produce", "README.md", "--topic", "t", "--timeout", "1",
                                      "--bootstrap-servers", "127.0.0.1:{closed}"], 3,
     ["kafka.bootstrap_servers", "RIBBON_KAFKA__BOOTSTRAP_SERVERS", "cannot reach"]),
    ("unreachable broker (replay)", ["replay", "dlq", "--bootstrap-servers", "127.0.0.1:{closed}",
                                     "--timeout", "1", "--no-progress"], 3,
     ["kafka.bootstrap_servers", "cannot reach"]),
    ("bad broker port", ["broker", "--broker-port", "70000"], 2, ["--broker-port", "70000"]),
    ("broker port in use", ["broker", "--broker-port", "{busy}"], 2, ["cannot listen", "{busy}"]),
    ("bad metrics port", ["run", "--port", "70000"], 2, ["server.port", "RIBBON_SERVER__PORT"]),
    ("--set without =", ["run", "--set", "nonsense"], 2, ["--set", "KEY=VALUE", "nonsense"]),
    ("--set unknown setting", ["run", "--set", "packer.nope=1"], 2, ["packer.nope", "unknown setting"]),
    ("broker takes no --set", ["broker", "--set", "a=b"], 2, ["unrecognized arguments", "--set"]),
    ("unknown librdkafka property", ["run", "--bootstrap-servers", "127.0.0.1:{closed}",
                                     "--set", "kafka.consumer_extra.bogus.prop=1"], 2,
     ["kafka.consumer_extra", "RIBBON_KAFKA__CONSUMER_EXTRA", "bogus.prop"]),
    ("bad librdkafka value", ["run", "--bootstrap-servers", "127.0.0.1:{closed}",
                              "--set", "kafka.producer_extra.acks=sometimes"], 2,
     ["kafka.producer_extra", "RIBBON_KAFKA__PRODUCER_EXTRA"]),
    ("--gpus without a cluster", ["run", "--gpus", "0,1"], 2, ["--gpus", "kafka.bootstrap_servers"]),
    ("--gpus all without CUDA", ["run", "--gpus", "all", "--device", "cpu", "--bootstrap-servers", "h:1"], 2,
     ["--gpus all", "no CUDA device"]),
    ("missing config file", ["run", "--config", "/no/such.toml"], 2, ["RIBBON_CONFIG", "/no/such.toml"]),
    ("bad input topic name", ["run", "--input-topic", "bad topic"], 2,
     ["kafka.input_topics", "RIBBON_KAFKA__INPUT_TOPICS"]),
    ("output topic is an input", ["run", "--input-topic", "a", "--output-topic", "a"], 2,
     ["kafka.output_topic", "feedback loop"]),
    ("bad produce topic", ["produce", "README.md", "--topic", "no/slash", "--bootstrap-servers", "h:1"], 2,
     ["--topic", "no/slash"]),
    ("bad replay target topic", ["replay", "dlq", "--to-topic", "a b", "--bootstrap-servers", "h:1"], 2,
     ["--to-topic", "'a b'"]),
    ("bad --worker-slot", ["run", "--worker-slot", "sometimes"], 2, ["kafka.worker_slot", "RIBBON_KAFKA__WORKER_SLOT"]),
    ("replay time not a time", ["replay", "dlq", "--bootstrap-servers", "127.0.0.1:{closed}", "--since", "yesterday"],
     2, ["not a time", "yesterday"]),
    ("benchmarks are not a command", ["bench", "e2e", "--documents", "10"], 2,
     ["python -m bench.<name>", "source checkout"]),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int, str, list[str]]]:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    bad_model = tmp_path_factory.mktemp("badmodel")
    (bad_model / "config.json").write_text("{}")  # a config, no weights, no tokenizer
    ports = {"closed": str(free_port()), "busy": str(busy.getsockname()[1]), "badmodel": str(bad_model)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RIBBON_", "HF_"))}
    env["HF_HOME"] = str(tmp_path_factory.mktemp("hf"))  # an empty Hugging Face cache
    empty = tmp_path_factory.mktemp("cfg") / "empty.toml"
    empty.write_text("")
    env["RIBBON_CONFIG"] = str(empty)
    # The cases run at once and /metrics listens from the start: no case may take the default port
    # (a case about the port names it with --port, which wins over the environment).
    env["RIBBON_SERVER__PORT"] = "0"
    procs = {}
    for name, argv, _, words in CASES:
        argv = [a.format(**ports) for a in argv]
        procs[name] = (subprocess.Popen([sys.executable, "-m", "worker", *argv], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                       [w.format(**ports) for w in words])
    out = {}
    try:
        for name, (p, words) in procs.items():
            _, err = p.communicate(timeout=120)
            out[name] = (p.returncode, err, words)
    finally:
        busy.close()
        for p, _ in procs.values():
            if p.poll() is None:
                p.kill()
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_invocation_is_one_line_and_its_exit_code(outcomes, case):
    name, _, code, _ = case
    rc, err, words = outcomes[name]
    # the worker's own JSON log lines may come first (a model that fails to load is found while loading)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith('{"ts":')]
    assert rc == code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("ribbon")
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_exit_codes_are_documented():
    text = (Path(ROOT) / "docs" / "operating.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    for code in {c[2] for c in CASES} | {0, 1}:
        assert f"| {code} |" in section
