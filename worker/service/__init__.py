"""The running worker: ingest → packer → GPU → delivery (DESIGN.md sections 1 and 6)."""
