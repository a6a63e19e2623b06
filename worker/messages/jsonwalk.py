"""Bounded walks over decoded JSON (orjson's dicts, lists and scalars), iterative: no recursion.

The input decoder (worker/messages/models.py) refuses nesting deeper than a limit in every field it does
not validate itself (attributes and unknown fields), before anything else walks the value: the
exact re-parse of big integers, pydantic, the output encoder. Only containers are visited, and a
path is built only for the one that breaks the limit.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

MAX_PATH_CHARS = 120


def too_deep(fields: dict[str, Any], limit: int, skip: Collection[str] = ()) -> str | None:
    """The dotted path of the first object/array nested more than `limit` levels inside `fields`
    (a field's own value is level 1), or None. Fields named in `skip` are not walked."""
    links: list[tuple[int, Any]] = []  # per container: (its parent's index, its key)
    stack: list[tuple[Any, int, int]] = []  # (container, level, index in links)
    for k, v in fields.items():
        if k not in skip and isinstance(v, (dict, list)):
            links.append((-1, k))
            stack.append((v, 1, len(links) - 1))
    while stack:
        value, level, i = stack.pop()
        if level > limit:
            return _path(links, i)
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, child in items:
            if isinstance(child, (dict, list)):
                links.append((i, k))
                stack.append((child, level + 1, len(links) - 1))
    return None


def _path(links: list[tuple[int, Any]], i: int) -> str:
    keys: list[str] = []
    while i >= 0:
        i, key = links[i]
        keys.append(str(key))
    path = ".".join(reversed(keys))
    return path if len(path) <= MAX_PATH_CHARS else path[:MAX_PATH_CHARS] + "..."
