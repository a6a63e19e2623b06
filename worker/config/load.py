"""Layering behind worker.config.settings.load_settings: TOML < environment < overrides.

Every value is resolved against the model tree before validation, so an
unknown key fails naming itself, and every error names its source.
"""

from __future__ import annotations

import difflib
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import orjson
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from worker.config.migration import moved, refusal
from worker.errors import RibbonError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_PREFIX = "RIBBON_"
CONFIG_ENV = "RIBBON_CONFIG"
# RIBBON_ variables that are not settings: the config file path and the C++ build switch.
# RIBBON_ variables that are not settings: the build flag, the cache folder, the GPU a --gpus child owns.
RESERVED_ENV = frozenset({CONFIG_ENV, "RIBBON_WERROR", "RIBBON_CACHE_DIR", "RIBBON_GPU_INDEX"})

Kind = Literal["group", "dict", "list", "scalar"]
Path_ = tuple[str, ...]


class SettingsError(RibbonError):
    """A bad or unknown setting; str() is one line naming it, its env var and what is allowed."""

    def __init__(self, setting: str, message: str, allowed: str = "", source: str = "", env_var: str | None = None):
        self.setting = setting
        self.env_var = env_var or env_var_for(setting)
        self.message = message
        self.allowed = allowed
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.env_var}, from {self.source}" if self.source else self.env_var
        line = f"setting {self.setting} ({where}): {self.message}"
        if self.allowed:
            line += f"; allowed: {self.allowed}"
        return " ".join(line.split())  # one line, whatever the parts held


_ROOT: list[type] = []  # the settings model; worker.config.settings registers it (it imports this module)


def register_root(model: type) -> None:
    """Make `model` the tree that env_var_for resolves names against (called once by worker.config.settings)."""
    _ROOT[:] = [model]


def env_var_for(path: str) -> str:
    """'kafka.bootstrap_servers' -> 'RIBBON_KAFKA__BOOTSTRAP_SERVERS' (a dict key maps to its dict's var)."""
    parts = path.split(".")
    if _ROOT:
        try:
            parts = list(resolve(_ROOT[0], parts, path)[0])
        except SettingsError:
            pass
    return _env_name(parts)


def _env_name(parts: list[str] | Path_) -> str:
    return ENV_PREFIX + "__".join(p.upper() for p in parts)


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def kind_of(field: FieldInfo) -> Kind:
    tp = _strip_optional(field.annotation)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "group"
    origin = get_origin(tp)
    if origin in (dict, Mapping):
        return "dict"
    if origin in (tuple, list):
        return "list"
    return "scalar"


def _unknown(model: type[BaseModel], prefix: Path_, part: str, source: str) -> SettingsError:
    name = ".".join((*prefix, part))
    near = difflib.get_close_matches(part, list(model.model_fields), n=1)
    hint = f"did you mean {'.'.join((*prefix, near[0]))}?" if near else "see docs/settings.md"
    return SettingsError(name, f"unknown setting; {hint}", source=source, env_var=_env_name((*prefix, part)))


def resolve(root: type[BaseModel], parts: list[str], source: str) -> tuple[Path_, str | None, Kind]:
    """Dotted parts -> (field path, key inside a dict setting or None, kind of the field)."""
    model, path = root, ()
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None or not part:
            raise _unknown(model, path, part, source)
        path, kind = (*path, part), kind_of(field)
        rest = parts[i + 1:]
        if kind == "group" and rest:
            model = _strip_optional(field.annotation)
            continue
        if kind == "dict" and rest:
            return path, ".".join(rest), kind
        if rest:
            raise SettingsError(".".join(parts), f"unknown setting; {'.'.join(path)} has no sub-settings",
                                source=source, env_var=_env_name(parts))
        return path, None, kind
    raise SettingsError("", "empty setting name", source=source, env_var=ENV_PREFIX)


def _field(root: type[BaseModel], path: Path_) -> FieldInfo:
    model: Any = root
    for part in path[:-1]:
        model = _strip_optional(model.model_fields[part].annotation)
    return model.model_fields[path[-1]]


def parse_text(kind: Kind, text: str, setting: str, source: str) -> Any:
    """A string from the environment or a --set flag, for a group, dict or list setting."""
    stripped = text.strip()
    if kind == "list" and not stripped.startswith("["):
        return [item.strip() for item in text.split(",") if item.strip()]
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        want = "a JSON array or comma-separated list" if kind == "list" else "a JSON object"
        raise SettingsError(setting, f"invalid JSON ({exc})", want, source) from None


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables inside a dict setting become dotted librdkafka keys."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        out.update(_flatten(item, name + ".") if isinstance(item, Mapping) else {name: item})
    return out


class _Layers:
    def __init__(self, root: type[BaseModel]):
        self.root = root
        self.values: dict[str, Any] = {}
        self.provenance: dict[Path_, str] = {}

    def assign(self, parts: list[str], value: Any, source: str, text: bool = False) -> None:
        name = ".".join(parts)
        old = moved(name)
        if old is not None:
            if old[0] == "group" and isinstance(value, Mapping) and value:
                for sub, item in value.items():  # a whole old table: name each key's new home
                    self.assign([*parts, str(sub)], item, source)
                return
            new_var = env_var_for(old[1]) if old[0] == "renamed" else None
            raise SettingsError(name, refusal(name, old, _env_name(parts), new_var), source=source,
                                env_var=_env_name(parts))
        path, key, kind = resolve(self.root, parts, source)
        if text and isinstance(value, str) and kind != "scalar" and key is None:
            value = parse_text(kind, value, name, source)
        if kind == "group" and key is None:
            if not isinstance(value, Mapping):
                raise SettingsError(name, f"expected a table of settings, got {type(value).__name__}", source=source)
            for sub, item in value.items():
                self.assign([*path, str(sub)], item, source)
            return
        node = self.values
        for part in path[:-1]:
            node = node.setdefault(part, {})
        self.provenance[path] = source
        if kind == "dict":
            current = node.get(path[-1])
            merged = dict(current) if isinstance(current, Mapping) else {}
            if key is not None:
                merged[key] = value
            elif isinstance(value, Mapping):
                merged.update(_flatten(value))
            else:
                merged = value  # not a mapping: validation names it
            node[path[-1]] = merged
        else:
            node[path[-1]] = value


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SettingsError("config", f"config file not found: {path}", "an existing TOML file (--config PATH)",
                            env_var=CONFIG_ENV) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError("config", f"cannot read {path}: {exc}", "a readable TOML file (--config PATH)",
                            env_var=CONFIG_ENV) from None


def layered_values(root: type[BaseModel], config: Path | None, environ: Mapping[str, str],
                   overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[Path_, str]]:
    layers = _Layers(root)
    if config is not None:
        source = f"config file {config}"
        for key, value in _read_toml(config).items():
            layers.assign([key], value, source)
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and upper not in RESERVED_ENV:
            parts = upper[len(ENV_PREFIX):].lower().split("__")
            layers.assign(parts, environ[name], "environment", text=True)
    for name, value in overrides.items():
        if value is not None:
            layers.assign(name.split("."), value, "command line", text=True)
    return layers.values, layers.provenance


def _show(value: Any, secret: bool) -> str:
    if secret:
        return "'**********'"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validation_error(root: type[BaseModel], exc: Any, values: Mapping[str, Any],
                     provenance: Mapping[Path_, str]) -> SettingsError:
    """The first pydantic error as a SettingsError (with a count of the others)."""
    errors = exc.errors(include_url=False)
    by_path: dict[tuple[Path_, str | None], list[dict[str, Any]]] = {}
    for err in errors:
        parts = [str(p) for p in err["loc"]]
        try:
            path, key, _ = resolve(root, _field_parts(root, parts), "")
        except SettingsError:
            path, key = tuple(parts), None
        by_path.setdefault((path, key), []).append(err)
    (path, key), errs = next(iter(by_path.items()))
    field = _field(root, path)
    setting = ".".join(path) + (f".{key}" if key else "")
    reason = errs[0]["msg"] if len(errs) == 1 else "not a valid value"
    reason = reason.removeprefix("Value error, ")
    secret = _strip_optional(field.annotation) is SecretStr
    got = f", got {_show(_lookup(values, path, key), secret)}" if path in provenance else ""
    more = f" (and {len(by_path) - 1} more errors)" if len(by_path) > 1 else ""
    return SettingsError(setting, f"{reason}{got}{more}", allowed_text(field), provenance.get(path, ""))


def _field_parts(root: type[BaseModel], loc: list[str]) -> list[str]:
    """Cut a pydantic loc after the field (and its dict key): union members, tuple indexes."""
    model: Any = root
    for i, part in enumerate(loc):
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return loc[:i] or loc
        kind = kind_of(field)
        if kind == "dict":
            return loc[: i + 2]
        if kind != "group":
            return loc[: i + 1]
        model = _strip_optional(field.annotation)
    return loc


def _lookup(values: Mapping[str, Any], path: Path_, key: str | None) -> Any:
    node: Any = values
    for part in (*path, *([key] if key else [])):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _bounds(field: FieldInfo) -> str:
    out = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                out.append(f"{sign} {bound}")
        if getattr(meta, "min_length", None) and kind_of(field) == "list":
            out.append(f"at least {meta.min_length} item(s)")
    return ", ".join(out)


def allowed_text(field: FieldInfo) -> str:
    """What a setting accepts, for error messages and docs/settings.md."""
    extra = field.json_schema_extra
    if isinstance(extra, Mapping) and "allowed" in extra:
        return str(extra["allowed"])
    tp, optional = _strip_optional(field.annotation), field.annotation is not _strip_optional(field.annotation)
    kind = kind_of(field)
    if get_origin(tp) is Literal:
        text = " | ".join(repr(a) for a in get_args(tp))
    elif kind == "dict":
        text = "table / JSON object of librdkafka properties (string, number or bool values)"
    elif kind == "list":
        text = "list of strings (TOML array; env: JSON array or comma-separated)"
    else:
        names = {int: "integer", float: "number", bool: "true | false", str: "string", SecretStr: "string (secret)"}
        text = names.get(tp, getattr(tp, "__name__", str(tp)))
        if tp is str and any(getattr(m, "min_length", None) for m in field.metadata):
            text = "non-empty string"
    bounds = _bounds(field)
    text = f"{text} {bounds}" if bounds and kind != "list" else (f"{text}, {bounds}" if bounds else text)
    return f"{text} (optional)" if optional else text


def iter_fields(model: type[BaseModel], prefix: Path_ = ()) -> Iterator[tuple[Path_, FieldInfo]]:
    """Every leaf setting in declaration order, with its dotted path."""
    for name, field in model.model_fields.items():
        if kind_of(field) == "group":
            yield from iter_fields(_strip_optional(field.annotation), (*prefix, name))
        else:
            yield (*prefix, name), field
