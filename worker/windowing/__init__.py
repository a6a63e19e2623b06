"""Streams of one-line records become documents: per-partition, per-key windows.

`windows.Windower` (pure, injected clock) assembles windows and decides when each closes;
`multiline` joins continuation lines to their first line. The ingest stage's hook (records in,
window documents out) is worker/pipeline/lines.py; docs/windowing.md describes the rules.
"""
