"""Child processes die with the worker, however the worker ends (kill -9 included).

The worker's children are the engine process (spawn), the preprocessing pool's forkserver and the
pool processes it forks, and multiprocessing's resource tracker. Each of the first three calls
`die_with_parent` as its first act: on Linux the kernel then sends it SIGKILL when its parent ends
(prctl PR_SET_PDEATHSIG), which a stuck or busy child cannot miss; elsewhere a daemon thread
polls the parent's pid. The chain is worker → forkserver → pool processes, and worker → engine
process. The resource tracker needs nothing: it exits once every process holding its pipe has.

Linux sends the signal when the parent *thread* that started the child ends, so a child must be
started from a thread that lives as long as the child is needed: the thread that builds the worker
starts the engine process and the forkserver (preprocess.start_forkserver, from Ingest's constructor).

Why not a library: psutil or a supervisor would watch from outside; only the child itself can
be sure to go, and prctl is one call through ctypes.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
POLL_S = 0.5


def die_with_parent(parent_pid: int | None = None) -> str:
    """Make this process end when its parent does; returns how ("prctl" or "poll"). If `parent_pid` is
    given and the parent already changed (it ended before this call), exit at once."""
    how = "poll"
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
            how = "prctl"
        else:
            log.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d): watching the parent instead", ctypes.get_errno())
    expected = parent_pid if parent_pid is not None else os.getppid()
    if os.getppid() != expected:
        os._exit(1)  # the parent is already gone
    if how == "poll":
        threading.Thread(target=_watch, args=(expected,), name="ribbon-lifeline", daemon=True).start()
    return how


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        threading.Event().wait(POLL_S)
    os._exit(1)
