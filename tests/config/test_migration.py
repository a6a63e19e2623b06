"""Renamed and removed settings (worker/config/migration.py): an old TOML key or RIBBON_* variable stops the
start with exit 2 and one line naming its new name, or saying why it is gone; never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from worker.config.load import env_var_for, iter_fields
from worker.config.migration import REMOVED, RENAMED
from worker.config.settings import Settings, SettingsError, load_settings

CURRENT = {".".join(path) for path, _ in iter_fields(Settings)}


def _old_var(path: str) -> str:
    return "RIBBON_" + "__".join(p.upper() for p in path.split("."))


def test_every_new_name_is_a_setting_and_no_old_name_is() -> None:
    assert set(RENAMED.values()) <= CURRENT
    assert not (set(RENAMED) | set(REMOVED)) & CURRENT
    assert not set(RENAMED) & set(REMOVED)


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_renamed_variable_names_its_new_one(tmp_path: Path, old: str) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(SettingsError) as err:
        load_settings(empty, environ={_old_var(old): "1"})
    line = str(err.value)
    assert "\n" not in line and _old_var(old) in line
    assert f"renamed: use {RENAMED[old]} ({env_var_for(RENAMED[old])})" in line


@pytest.mark.parametrize("old", sorted(REMOVED))
def test_a_removed_toml_key_says_why(tmp_path: Path, old: str) -> None:
    group, name = old.split(".")
    cfg = tmp_path / "old.toml"
    cfg.write_text(f"[{group}]\n{name} = 1\n")
    with pytest.raises(SettingsError) as err:
        load_settings(cfg, environ={})
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"setting {old} ({_old_var(old)}, from config file")
    assert f"removed: {REMOVED[old]}" in line


def test_an_old_group_table_names_each_key(tmp_path: Path) -> None:
    cfg = tmp_path / "old.toml"
    cfg.write_text("[packer]\ntoken_budget = 4096\n")
    with pytest.raises(SettingsError, match=r"packer.token_budget .*renamed: use batching.token_budget "
                                            r"\(RIBBON_BATCHING__TOKEN_BUDGET\)"):
        load_settings(cfg, environ={})


def _ribbon(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("source", ["toml", "env"])
def test_ribbon_refuses_an_old_name_with_one_line_and_exit_2(tmp_path: Path, source: str) -> None:
    cfg = tmp_path / "ribbon.toml"
    cfg.write_text("[model]\nmax_new_tokens = 64\n" if source == "toml" else "")
    env = {"RIBBON_CONFIG": str(cfg)} | ({"RIBBON_MODEL__MAX_NEW_TOKENS": "64"} if source == "env" else {})
    res = _ribbon(["run", "--bootstrap-servers", "127.0.0.1:9"], env)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("ribbon: error: setting model.max_new_tokens (RIBBON_MODEL__MAX_NEW_TOKENS")
    assert "renamed: use generation.max_new_tokens (RIBBON_GENERATION__MAX_NEW_TOKENS)" in lines[0]


def test_ribbon_refuses_a_removed_variable_saying_why(tmp_path: Path) -> None:
    cfg = tmp_path / "ribbon.toml"
    cfg.write_text("")
    res = _ribbon(["run", "--bootstrap-servers", "127.0.0.1:9"],
                  {"RIBBON_CONFIG": str(cfg), "RIBBON_KAFKA__COMPRESSION_TYPE": "lz4"})
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "RIBBON_KAFKA__COMPRESSION_TYPE" in lines[0] and "removed:" in lines[0]
    assert "'compression.type' in kafka.producer_extra" in lines[0]


def test_an_unknown_key_of_a_retired_group_names_where_its_settings_are(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"setting packer.nope \(RIBBON_PACKER__NOPE, from environment\): the group "
                                            r"packer is gone: its settings are in batching"):
        load_settings(_empty(tmp_path), environ={"RIBBON_PACKER__NOPE": "1"})


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.toml"
    path.write_text("")
    return path
