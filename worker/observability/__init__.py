"""What the worker tells its operators: Prometheus metrics, the /metrics /healthz /readyz server, logs, GC pauses,
OpenTelemetry traces (tracing.py), the group-join log line (joinwatch.py)."""
