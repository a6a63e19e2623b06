"""Ribbon: a Kafka consumer worker that summarizes telemetry on a GPU."""

__version__ = "0.1.0"
