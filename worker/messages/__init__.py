"""Message models: input decoding and the output and dead-letter records (models.py), the output's digest (digest.py)."""
