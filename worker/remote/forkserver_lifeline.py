"""Preloaded by the preprocessing pool's forkserver (worker/pipeline/preprocess.py): the forkserver
dies with the worker that started it (worker/remote/lifeline.py).

The import acts only inside a forkserver (started as `python -c "from multiprocessing.forkserver
import main; ..."`, which imports its preload modules before serving); imported anywhere else it
does nothing. The forkserver stays single-threaded: on Linux this is prctl alone.
"""

from __future__ import annotations

import sys


def _in_forkserver() -> bool:
    return sys.argv == ["-c"] and "multiprocessing.forkserver" in sys.modules


if _in_forkserver() and sys.platform.startswith("linux"):
    from worker.remote.lifeline import die_with_parent

    die_with_parent()
