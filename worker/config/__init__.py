"""Configuration: the settings model and its layering (TOML < environment < flags), and start-up errors.

The bottom layer: imports nothing else of `worker`.
"""
