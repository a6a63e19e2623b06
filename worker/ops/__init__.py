"""Operations: start-up errors, worker identity, the HTTP server, replay, validate, the --gpus supervisor."""
