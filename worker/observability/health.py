"""Health, as each source reports it and as /healthz and /readyz combine it.

Every stage of the pipeline is a source (`health()`, worker/pipeline/stage.py), and so is anything
else the app adds to its list of health sources (a watch of its own): each judges its own progress,
and the app combines them (`combine`) for the probes (worker/observability/metrics.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Health:
    """One source's health: live (/healthz: False means restart me), ready (/readyz: False means send me
    no traffic, e.g. stalled or no partitions), and why not (empty when both hold)."""

    live: bool = True
    ready: bool = True
    why: str = ""


HEALTHY = Health()


class HealthSource(Protocol):
    """Anything the app asks for health: every stage, and any other watch added to its list."""

    def health(self) -> Health: ...


def combine(healths: Iterable[Health]) -> Health:
    """Live only if all are, ready only if all are; the reasons of those that are not, in order."""
    hs = list(healths)
    why = "; ".join(h.why for h in hs if h.why and not (h.live and h.ready))
    return Health(all(h.live for h in hs), all(h.ready for h in hs), why)
