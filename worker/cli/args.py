"""What every `ribbon` command reads from its arguments: the settings (flags > environment > file) and topic names."""

from __future__ import annotations

import argparse
from typing import Any

from worker.config.errors import fail
from worker.config.settings import SettingsError, _topic, load_settings


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--set takes KEY=VALUE (a dotted setting name, e.g. batching.max_wait_ms=20), got {item!r}")
        out[key.strip()] = value
    for name, value in vars(args).items():
        if name.startswith("set_") and value is not None:
            out[name[4:].replace("__", ".")] = value
    return out


def load(args: argparse.Namespace):
    """Settings from flags > environment > config file > defaults; a bad value exits 2."""
    try:
        return load_settings(config_path=args.config, overrides=overrides(args))
    except SettingsError as exc:
        fail(str(exc))


def topic_name(text: str) -> str:
    try:
        return _topic(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
