"""What the worker tells operators beyond /metrics: OpenTelemetry traces (tracing.py)."""
