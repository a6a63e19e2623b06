"""The `ribbon` command (main.py) and its operators' commands: produce, replay, validate, `run --gpus`, schemas."""
