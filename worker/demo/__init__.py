"""`ribbon demo` and its synthetic telemetry; reached only by the CLI's demo command, benchmarks and tests."""
