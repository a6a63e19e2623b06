"""Streams of one-line records become documents: per-partition, per-key windows.

`windows.Windower` (pure, injected clock) assembles windows and decides when each closes;
`multiline` joins continuation lines to their first line; `stage.LineStream` is the ingest
stage's hook (records in, window documents out). docs/windowing.md describes the rules.
"""
