"""What the redaction pass does, as a frozen, picklable value (it travels to the preprocessing pool)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    enabled: bool = True
    extra_patterns: tuple[tuple[str, str], ...] = ()  # (kind, regex): group 1 (or the match) is the secret
    allowed_keys: frozenset[str] = frozenset()        # key names (lower case) the key=value rule leaves alone
    dead_letters: bool = False                        # redact dead letters' values too (they lose replay fidelity)

    @classmethod
    def of(cls, settings) -> Policy:
        """From worker.config.groups.RedactionSettings."""
        return cls(settings.enabled, tuple(sorted(settings.extra_patterns.items())),
                   frozenset(k.lower() for k in settings.allowed_keys), settings.dead_letters)
