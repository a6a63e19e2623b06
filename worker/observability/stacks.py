"""Every thread's stack on request: `kill -USR1 <pid>` prints them to stderr, the process goes on.

    dump_stacks_on_usr1() -> registers the handler (the worker at start, the engine process at start)

The standard library's faulthandler writes the stacks from its C handler (no Python code runs in the
signal handler, so no lock the interrupted thread holds is needed): a worker that looks stuck (readiness
failing, nothing committed) shows where each thread waits without stopping it; the engine process is a
process of its own (`pgrep -f multiprocessing.spawn`).
"""

from __future__ import annotations

import faulthandler
import signal
import sys


def dump_stacks_on_usr1() -> None:
    """SIGUSR1 prints every thread's stack to stderr (and the process continues)."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
