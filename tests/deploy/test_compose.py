"""docker-compose.yml and deploy/ agree with the code: settings, topics, GPUs, health, metric names.

Docker is not needed: these read the files and check them against worker.config.settings
and worker.observability.metrics, the things that break silently when one side changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from worker.observability.metrics import Metrics
from worker.config.model import hub_offline
from worker.config.settings import Settings, load_settings
from worker.kafka.config import kafka_client_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"
_INTERP = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose_value(text: str) -> str:
    """Compose interpolation as on a host that sets none of the variables: ${X:-default} -> default."""
    return _INTERP.sub(lambda m: m.group(2) or "", str(text)).replace("$$", "$")


def seconds(duration: str) -> float:
    """A compose duration ('60s', '1m30s', '500ms') in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a compose duration: {duration!r}")
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    return sum(float(n) * scale[u] for n, u in parts)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def workers(compose, tmp_path_factory) -> dict[str, tuple[dict, Settings]]:
    """Every service that runs the worker: name -> (service, settings loaded from its environment only)."""
    no_file = tmp_path_factory.mktemp("cfg") / "empty.toml"  # the image has no config/ribbon.toml
    no_file.write_text("")
    out = {}
    for name, svc in compose["services"].items():
        env = {k: compose_value(v) for k, v in (svc.get("environment") or {}).items()}
        if any(k.startswith("RIBBON_") for k in env):
            out[name] = (svc, load_settings(config_path=no_file, environ=env))
    assert out, "no worker service in docker-compose.yml"
    return out


def test_every_ribbon_variable_is_a_valid_setting(workers):
    # load_settings raised in the fixture on any unknown or bad RIBBON_ variable; check what it loaded
    for name, (svc, s) in workers.items():
        assert s.kafka.bootstrap_servers, f"{name}: no bootstrap servers (the embedded broker would start)"
        if s.model.mode == "digest":
            continue   # no model: nothing to mount
        assert hub_offline(svc["environment"]) and svc["environment"].get("HF_HUB_OFFLINE") == "1"
        assert s.model.path.startswith("/models/")
        assert any(v.endswith(":/models:ro") for v in svc["volumes"]), f"{name}: weights not mounted read-only"


def test_compose_variables_never_look_like_settings(tmp_path):
    """The compose file's own variables (exported on the host to run `docker compose`) are no RIBBON_ names:
    a host-side `ribbon` reads every RIBBON_ variable as a setting and exits 2 on an unknown one."""
    names = sorted({m.group(1) for m in _INTERP.finditer(COMPOSE.read_text())})
    assert names and not [n for n in names if n.startswith("RIBBON_")], names
    no_file = tmp_path / "empty.toml"
    no_file.write_text("")
    load_settings(config_path=no_file, environ={n: "/srv/models" for n in names})  # raises on a RIBBON_ name


def test_a_host_side_ribbon_runs_with_the_documented_compose_variables_exported(tmp_path):
    import subprocess
    import sys

    documented = re.findall(r"^(\w+=\S+(?: \w+=\S+)*) docker compose up", (ROOT / "docs/operating.md").read_text(), re.M)
    assert documented
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update(kv.split("=", 1) for line in documented for kv in line.split())
    out = subprocess.run([sys.executable, "-m", "worker", "validate", "--help"], env=env, capture_output=True,
                         text=True, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-c", "from worker.config.settings import load_settings; load_settings()"],
                         env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr


def test_the_gpu_and_the_gpu_free_profiles(compose, workers):
    """`docker compose up` (.env: COMPOSE_PROFILES=gpu) runs the GPU worker; COMPOSE_PROFILES=digest the slim
    digest image with no GPU reservation, scraped under the same name."""
    env_file = dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert env_file == {"COMPOSE_PROFILES": "gpu"}
    profiles = {name: svc.get("profiles", []) for name, (svc, _) in workers.items()}
    assert profiles == {"worker": ["gpu"], "worker-digest": ["digest"]}
    digest_svc, digest = workers["worker-digest"]
    assert digest.model.mode == "digest" and digest_svc["build"]["target"] == "digest"
    assert re.search(r"^FROM \S+ AS digest$", (ROOT / "Dockerfile").read_text(), re.M)
    assert not [v for v in digest_svc.get("volumes", []) if "/models" in v], "no model to mount"
    assert digest_svc["networks"]["default"]["aliases"] == ["worker"]
    others = [n for n, svc in compose["services"].items() if n not in workers]
    assert not [n for n in others if compose["services"][n].get("profiles")], "the rest runs under every profile"


def test_workers_share_a_group_and_nothing_else_that_must_be_distinct(workers):
    settings = [s for _, s in workers.values()]
    assert len({s.kafka.group_id for s in settings}) == 1
    slots = [s.kafka.worker_slot for s in settings]
    assert len(set(slots)) == len(slots), f"worker slots repeat: {slots} (one transactional.id per worker)"
    ids = [kafka_client_config(s.kafka)[1].get("transactional.id") for s in settings]
    assert len(set(ids)) == len(ids)


def test_each_worker_reserves_its_own_gpu(workers):
    seen: list[str] = []
    for name, (svc, s) in workers.items():
        if s.model.mode == "digest":   # the GPU-free profile: no model, no GPU
            assert "deploy" not in svc and s.engine.device == "cpu", name
            continue
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        gpus = [d for d in devices if "gpu" in d.get("capabilities", [])]
        assert len(gpus) == 1, f"{name}: expected one GPU reservation, got {devices}"
        assert s.engine.device.startswith("cuda")
        seen += [str(i) for i in gpus[0].get("device_ids", [])]
    assert len(set(seen)) == len(seen), f"two workers reserve the same GPU: {seen}"


def _created_topics(compose) -> dict[str, tuple[int, int]]:
    """Topics the one-shot service creates: name -> (partitions, replication factor)."""
    script = "\n".join(compose_value(c) for c in compose["services"]["topics"]["command"])
    out = {}
    for line in script.splitlines():
        if "--create" in line:
            def flag(f: str, text: str = line) -> str:
                return re.search(rf"{f}[ =](\S+)", text).group(1)

            out[flag("--topic")] = (int(flag("--partitions")), int(flag("--replication-factor")))
    return out


def test_the_worker_topics_are_the_created_ones(compose, workers):
    created = _created_topics(compose)
    for name, (_, s) in workers.items():
        used = {*s.kafka.input_topics, s.kafka.output_topic, s.kafka.dlq_topic}
        assert used <= set(created), f"{name} uses topics nobody creates: {sorted(used - set(created))}"
    for _, (_, s) in workers.items():
        partitions = sum(created[t][0] for t in s.kafka.input_topics)
        assert partitions >= len(workers), "fewer input partitions than workers: some would idle"
    assert compose["services"]["kafka"]["environment"].get("KAFKA_AUTO_CREATE_TOPICS_ENABLE") == "false"


def test_the_single_broker_can_hold_what_is_asked_of_it(compose, workers):
    kafka = compose["services"]["kafka"]["environment"]
    assert str(kafka["KAFKA_PROCESS_ROLES"]) == "broker,controller"
    assert len(str(kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"]).split(",")) == 1
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert int(kafka[key]) == 1, f"{key}={kafka[key]}: one broker cannot satisfy it (transactions hang)"
    assert all(rf == 1 for _, rf in _created_topics(compose).values())
    internal = {urlparse(u).netloc for u in str(kafka["KAFKA_ADVERTISED_LISTENERS"]).split(",")}
    for name, (_, s) in workers.items():
        servers = set(s.kafka.bootstrap_servers.split(","))
        assert servers <= internal, f"{name} bootstraps from {servers}, not an advertised listener {internal}"
        # dead letters re-send the input bytes plus headers: the broker must accept what the producer sends
        producer = kafka_client_config(s.kafka)[1]
        assert int(kafka["KAFKA_MESSAGE_MAX_BYTES"]) >= producer["message.max.bytes"]


def test_the_healthcheck_hits_the_configured_port(workers):
    for name, (svc, s) in workers.items():
        check = " ".join(svc["healthcheck"]["test"])
        urls = re.findall(r"https?://[^\s'\"]+", check)
        assert len(urls) == 1, check
        url = urlparse(urls[0])
        assert (url.port, url.path) == (s.server.port, "/healthz"), f"{name}: healthcheck {urls[0]}"
        assert str(s.server.port) in {str(p) for p in svc.get("expose", [])}
        assert s.server.host == "0.0.0.0", "Prometheus scrapes from another container"


def test_docker_waits_longer_than_the_drain(workers):
    for name, (svc, s) in workers.items():
        assert svc.get("init") is True, f"{name}: without init, SIGTERM handling relies on PID 1 semantics"
        assert seconds(svc["stop_grace_period"]) > s.drain_timeout_s + 5, \
            f"{name}: docker would SIGKILL the worker mid-drain (drain_timeout_s={s.drain_timeout_s})"


def test_prometheus_scrapes_every_worker_on_its_port(workers):
    prom = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "ribbon")
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    names = {name: (svc.get("networks") or {}).get("default", {}).get("aliases", [name])[0]
             for name, (svc, _) in workers.items()}
    assert targets == {f"{names[name]}:{s.server.port}" for name, (_, s) in workers.items()}
    assert job.get("metrics_path", "/metrics") == "/metrics"


def _known_series() -> set[str]:
    """Every series name a PromQL query may use, from what Metrics() actually renders."""
    names = set()
    for fam in text_string_to_metric_families(Metrics().render().decode()):
        names |= {s.name for s in fam.samples}
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
        names |= {fam.name + suf for suf in suffixes.get(fam.type, ())}
    return names


def _queries() -> dict[str, list[str]]:
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "ribbon.json").read_text())
    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yml").read_text())
    return {
        "dashboard": [t["expr"] for p in dash["panels"] for t in p.get("targets", [])],
        "rules": [r["expr"] for g in rules["groups"] for r in g["rules"]],
        "prometheus.yml": [(DEPLOY / "prometheus.yml").read_text()],
    }


def test_every_metric_name_in_dashboards_and_rules_exists():
    known = _known_series()
    for where, exprs in _queries().items():
        for expr in exprs:
            used = set(re.findall(r"\bribbon_[a-z0-9_]+\b", expr))
            assert used <= known, f"{where}: unknown metric(s) {sorted(used - known)} in {expr!r}"


def test_the_dashboard_shows_what_operators_need():
    used = {m for e in _queries()["dashboard"] for m in re.findall(r"\bribbon_[a-z0-9_]+\b", e)}
    needed = {"ribbon_produced_summaries_total", "ribbon_input_tokens_total", "ribbon_output_tokens_total",
              "ribbon_end_to_end_latency_seconds_bucket", "ribbon_consumer_lag_messages",
              "ribbon_bin_fill_ratio_sum", "ribbon_pending_tokens", "ribbon_dead_lettered_messages_total",
              "ribbon_transaction_commits_total", "ribbon_transaction_aborts_total", "ribbon_oom_splits_total"}
    assert needed <= used, f"dashboard lacks {sorted(needed - used)}"
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "ribbon.json").read_text())
    ds = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uids = {d["uid"] for d in ds["datasources"]}
    assert {p["datasource"]["uid"] for p in dash["panels"] if p["type"] != "row"} <= uids
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_mounted_files_and_copied_sources_exist(compose):
    for name, svc in compose["services"].items():
        for vol in svc.get("volumes", []):
            src = compose_value(vol).split(":")[0]
            if src.startswith("./deploy"):
                assert (ROOT / src).exists(), f"{name} mounts missing {src}"
    dockerfile = (ROOT / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
    ignored = (ROOT / ".dockerignore").read_text()
    for src in ("pyproject.toml", "CMakeLists.txt", "README.md", "ext/", "worker/"):
        assert f"!{src}" in ignored, f".dockerignore drops {src}, which the build needs"


def test_the_image_runs_the_worker():
    from worker.cli.main import COMMANDS

    lines = (ROOT / "Dockerfile").read_text().splitlines()
    entry = json.loads(next(x for x in lines if x.startswith("ENTRYPOINT ")).split(" ", 1)[1])
    cmd = json.loads(next(x for x in lines if x.startswith("CMD ")).split(" ", 1)[1])
    assert entry == ["ribbon"]
    assert re.search(r'^ribbon = "worker\.cli\.main:main"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert cmd[0] in COMMANDS and cmd[0] == "run"
