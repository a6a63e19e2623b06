"""The running worker's stages: ingest → packer → GPU → finishing → delivery; app.py composes them."""
