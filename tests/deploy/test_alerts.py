"""Alert rules, Alertmanager and the start-up they must not page on.

- promtool (from Debian's `prometheus` package; `make promtool` installs it) checks the rules and runs the cases
  of deploy/prometheus-rules.test.yml; amtool (`prometheus-alertmanager`) checks deploy/alertmanager.yml.
  Missing tools fail: CI installs them (Makefile), nothing is skipped.
- Every alert has a severity label, an absolute runbook_url annotation naming a section of docs/operating.md
  (one base for all), and a case that fires it; "no ready worker at all" is one of them.
- A worker's /metrics answers while its model loads (ribbon_starting 1, /healthz 503): `up == 0` never means
  "still loading", so RibbonWorkerDown does not page on a slow start.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from helpers import wait_for
from worker.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES = yaml.safe_load((DEPLOY / "prometheus-rules.yml").read_text())
ALERTS = {r["alert"]: r for g in RULES["groups"] for r in g["rules"]}
RUNBOOK_BASE = "https://github.com/ribbon-worker/ribbon/blob/main/docs/operating.md"


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: `make promtool` installs it (Debian packages prometheus, " \
                 "prometheus-alertmanager)"
    return path


def run(*cmd: str) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_promtool_checks_the_rules_and_runs_their_cases():
    promtool = tool("promtool")
    run(promtool, "check", "rules", str(DEPLOY / "prometheus-rules.yml"))
    out = run(promtool, "test", "rules", str(DEPLOY / "prometheus-rules.test.yml"))
    assert "SUCCESS" in out
    run(promtool, "check", "config", "--syntax-only", str(DEPLOY / "prometheus.yml"))


def test_promtool_cases_catch_an_alert_that_pages_on_start_up(tmp_path):
    """The cases are not vacuous: a rule without readiness (one that pages while a worker loads) fails them."""
    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yml").read_text())
    for r in rules["groups"][0]["rules"]:
        if r["alert"] == "RibbonWorkerDown":
            r["expr"] = 'up{job="ribbon"} == 0 or ribbon_starting == 1'  # pages whenever a worker starts
    (tmp_path / "prometheus-rules.yml").write_text(yaml.safe_dump(rules))
    shutil.copy(DEPLOY / "prometheus-rules.test.yml", tmp_path)
    res = subprocess.run([tool("promtool"), "test", "rules", str(tmp_path / "prometheus-rules.test.yml")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "RibbonWorkerDown" in res.stdout + res.stderr


def test_alertmanager_config_is_valid_and_routes_every_severity():
    run(tool("amtool"), "check-config", str(DEPLOY / "alertmanager.yml"))
    am = yaml.safe_load((DEPLOY / "alertmanager.yml").read_text())
    routed = {re.search(r'severity="(\w+)"', m).group(1) for r in am["route"]["routes"] for m in r["matchers"]}
    assert routed == {"critical", "info"} and am["route"]["receiver"]  # warning: the default receiver
    prom = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = [t for a in prom["alerting"]["alertmanagers"] for sc in a["static_configs"] for t in sc["targets"]]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert targets == ["alertmanager:9093"] and "alertmanager" in compose["services"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#{1,6} (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_alert_has_a_severity_a_runbook_section_and_a_firing_case():
    anchors = _anchors((ROOT / "docs" / "operating.md").read_text())
    cases = yaml.safe_load((DEPLOY / "prometheus-rules.test.yml").read_text())["tests"]
    fired = {t["alertname"] for c in cases for t in c["alert_rule_test"] if t.get("exp_alerts")}
    for name, rule in ALERTS.items():
        labels = rule.get("labels", {})
        assert labels.get("severity") in {"critical", "warning", "info"}, name
        url = rule.get("annotations", {}).get("runbook_url", "")
        page, _, anchor = url.partition("#")
        assert page == RUNBOOK_BASE and anchor in anchors, f"{name}: runbook {url}"
        assert "runbook_url" not in labels, f"{name}: a label would split the alert's series by it"
        assert name in fired, f"{name}: no promtool case where it fires"
    assert {n for n, r in ALERTS.items() if r["labels"]["severity"] == "critical"} == \
        {"RibbonWorkerDown", "RibbonNoProgress", "RibbonNoReadyWorker", "RibbonPartitionStalled"}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_answer_while_the_model_loads(monkeypatch):
    from worker.pipeline import app

    loading, release = threading.Event(), threading.Event()

    def slow_load(settings, engine=None, stop=None):
        loading.set()
        release.wait(30)
        raise OSError("no weights here")  # the load fails in the end: the server must go with it

    monkeypatch.setattr(app, "build_parts", slow_load)
    with socket.socket() as s:  # a free port (server.port 0 disables the server)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = load_settings(environ={"RIBBON_SERVER__PORT": str(port), "RIBBON_MODEL__PATH": "/nowhere"})
    made: dict = {}
    t = threading.Thread(target=lambda: made.setdefault("error", _build(app, settings)), daemon=True)
    t.start()
    wait_for(loading.is_set, 30, "the model load to begin")
    status, body = _get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200 and "ribbon_starting 1.0" in body and "ribbon_ready 0.0" in body
    assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 503
    assert _get(f"http://127.0.0.1:{port}/readyz")[0] == 503
    release.set()
    t.join(30)
    assert isinstance(made["error"], OSError)
    with pytest.raises(OSError):  # the port is closed again
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def _build(app, settings):
    try:
        app.Worker(settings, "127.0.0.1:9")
    except OSError as exc:
        return exc
    return None
