"""Typed, frozen, validated settings (DESIGN.md section 3).

Precedence: overrides (CLI flags) > environment (RIBBON_ prefix, nested with
__) > TOML file (--config PATH, RIBBON_CONFIG, else config/ribbon.toml of the
repo if present) > the defaults below. Groups merge field by field and dict
settings key by key; lists are replaced whole. Any bad or unknown key raises
SettingsError, whose str() is one line naming the setting, its environment
variable and what is allowed. docs/settings.md and config/ribbon.toml are
generated from these models (python -m worker.cli.schemas); the groups are in
worker/config/groups.py and worker/config/model.py; renamed and removed names are refused by
worker/config/migration.py.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from worker.config.groups import (
    DigestSettings, KafkaSettings, PipelineSettings, RedactionSettings, ServerSettings, WindowingSettings, _topic,
)
from worker.config.load import SettingsError, env_var_for, layered_values, register_root, validation_error
from worker.config.model import (
    BatchingSettings, EngineSettings, GenerationSettings, ModelRun, ModelSettings, model_run,
)

__all__ = [
    "BatchingSettings", "DigestSettings", "EngineSettings", "GenerationSettings", "KafkaSettings", "ModelRun",
    "ModelSettings", "PipelineSettings", "RedactionSettings", "ServerSettings", "Settings", "SettingsError",
    "WindowingSettings", "_topic", "cli_exit_on_error", "env_var_for", "load_settings", "model_run",
]


class Settings(BaseSettings):
    """The root; build it with load_settings(), which does all the layering."""

    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", env_prefix="RIBBON_", env_nested_delimiter="__", case_sensitive=False
    )

    kafka: KafkaSettings = KafkaSettings()
    model: ModelSettings = ModelSettings()
    generation: GenerationSettings = GenerationSettings()
    engine: EngineSettings = EngineSettings()
    batching: BatchingSettings = BatchingSettings()
    digest: DigestSettings = DigestSettings()
    pipeline: PipelineSettings = PipelineSettings()
    windowing: WindowingSettings = WindowingSettings()
    redaction: RedactionSettings = RedactionSettings()
    server: ServerSettings = ServerSettings()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="case-insensitive")
    log_format: Literal["json", "text"] = Field("json", description="log line format")
    drain_timeout_s: float = Field(30.0, ge=0.0, description="shutdown drains this long at most")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings() layers TOML, environment and overrides itself: the stock
        # env source ignores unknown RIBBON_ variables and cannot read a given environ.
        return (init_settings,)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v


def _repo_config() -> Path | None:
    path = Path(__file__).resolve().parents[2] / "config" / "ribbon.toml"
    return path if path.is_file() else None


register_root(Settings)


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from overrides > environ (default os.environ) > TOML > defaults.

    Override keys are dotted paths ("kafka.bootstrap_servers"; a dict setting's
    key may follow: "kafka.consumer_extra.fetch.min.bytes"); a None value means
    "flag not given". String values for lists and dicts are parsed as from env.
    """
    env = os.environ if environ is None else environ
    if config_path is None and env.get("RIBBON_CONFIG"):
        config_path = env["RIBBON_CONFIG"]
    path = Path(config_path) if config_path is not None else _repo_config()
    values, provenance = layered_values(Settings, path, env, overrides or {})
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise validation_error(Settings, exc, values, provenance) from None


F = TypeVar("F", bound=Callable[..., Any])


def cli_exit_on_error(fn: F) -> F:
    """Decorator for CLI entry points: SettingsError -> `ribbon: error: <line>` on stderr, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SettingsError as exc:
            print(f"ribbon: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]
