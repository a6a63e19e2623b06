"""The model in its own process: the worker's handle (process.py) and the engine process's side (child.py)."""
