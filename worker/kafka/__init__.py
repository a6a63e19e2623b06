"""Kafka plumbing: client configuration and construction, record headers, worker identity, the embedded broker."""
