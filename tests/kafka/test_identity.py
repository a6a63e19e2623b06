"""Worker identity without hand numbering: each form of kafka.worker_slot, and where it is unique and stable."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.kafka.identity import GPU_INDEX_ENV, IdentityError, resolve_identity
from worker.config.settings import SettingsError, load_settings
from worker.kafka.config import kafka_client_config


def settings(tmp_path: Path, slot: str):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    return load_settings(empty, environ={"RIBBON_KAFKA__WORKER_SLOT": slot, "RIBBON_KAFKA__GROUP_ID": "g"})


def test_integer_slot_is_kept_as_before(tmp_path):
    s = settings(tmp_path, "3")
    assert s.kafka.worker_slot == 3
    assert kafka_client_config(s.kafka, bootstrap="h:1")[1]["transactional.id"] == "ribbon-g-3"


def test_auto_is_the_short_host_name_stable_across_restarts():
    # a StatefulSet pod, a compose container (its id), a machine
    for host, want in (("ribbon-worker-2", "ribbon-worker-2"), ("3f2a9c1b7d0e", "3f2a9c1b7d0e"),
                       ("gpu-node-7.example.com", "gpu-node-7")):
        assert resolve_identity("auto", environ={}, hostname=host) == want
        assert resolve_identity("auto", environ={}, hostname=host) == want  # same after a restart
    assert resolve_identity("auto", environ={}, hostname="we!rd host") == "we_rd_host"  # safe in an id


def test_ordinal_is_the_statefulset_index_and_fails_elsewhere():
    assert resolve_identity("ordinal", environ={}, hostname="ribbon-worker-12") == "12"
    with pytest.raises(IdentityError, match="no StatefulSet ordinal"):
        resolve_identity("ordinal", environ={}, hostname="laptop")


def test_random_is_unique_and_new_at_every_start():
    from worker.kafka import identity

    one = resolve_identity("random", environ={}, hostname="h")
    assert one == resolve_identity("random", environ={}, hostname="other")  # fixed for the process
    ids = set()
    for _ in range(200):  # a new process: a new id
        identity._process_random.cache_clear()
        ids.add(resolve_identity("random", environ={}, hostname="h"))
    assert len(ids) == 200 and all(len(i) == 12 and int(i, 16) >= 0 for i in ids)


def test_gpu_children_of_one_host_never_share_an_identity():
    ids = [resolve_identity(form, environ={GPU_INDEX_ENV: str(g)}, hostname="node-a")
           for form in ("auto", 0) for g in range(4)]
    assert ids[:4] == [f"node-a-gpu{g}" for g in range(4)] and ids[4:] == [f"0-gpu{g}" for g in range(4)]
    assert len(set(ids)) == len(ids)


def test_ordinal_outside_a_statefulset_is_a_settings_error(tmp_path, monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "laptop")
    s = settings(tmp_path, "ordinal")
    with pytest.raises(SettingsError, match=r"kafka.worker_slot \(RIBBON_KAFKA__WORKER_SLOT\)"):
        kafka_client_config(s.kafka, bootstrap="h:1")


@pytest.mark.parametrize("bad", ["-1", "sometimes", "1.5"])
def test_bad_slots_are_refused(tmp_path, bad):
    with pytest.raises(SettingsError, match="kafka.worker_slot"):
        settings(tmp_path, bad)


def test_at_least_once_needs_no_identity(tmp_path):
    empty = tmp_path / "e.toml"
    empty.write_text("")
    s = load_settings(empty, environ={"RIBBON_KAFKA__DELIVERY": "at_least_once", "RIBBON_KAFKA__WORKER_SLOT": "random"})
    assert "transactional.id" not in kafka_client_config(s.kafka, bootstrap="h:1")[1]
