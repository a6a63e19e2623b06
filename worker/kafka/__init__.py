"""Kafka plumbing: the embedded broker and client helpers."""
