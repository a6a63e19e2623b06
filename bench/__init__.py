"""Benchmark scripts, run from the repository root as `python -m bench.NAME` (bench/RESULTS.md lists what each saved)."""
