"""SIGTERM/SIGINT handling (worker/pipeline/app.py install_signal_handlers), in a process of its own:
a handler interrupts the main thread between two bytecodes, so each case runs in a child with a
bound on its life (a handler that waits on a lock its own thread holds never returns)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    from worker.pipeline.app import install_signal_handlers

    stop = install_signal_handlers()
    {body}
""")


def run_child(body: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    code = CHILD.format(body=textwrap.dedent(body))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)


def test_a_signal_while_the_main_thread_is_inside_the_events_wait_still_sets_it():
    # as in Event.wait between taking the event's lock and waiting: the handler runs in this thread then
    out = run_child("""
        with stop._cond:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # bytecodes: the handler runs here, holding nothing of its own
                pass
            time.sleep(0.1)
        print("set" if stop.wait(10) else "unset")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "set"


def test_a_signal_while_logging_holds_its_lock_still_sets_the_event():
    out = run_child("""
        import logging
        logging.basicConfig(level=logging.INFO)
        handler = logging.getLogger().handlers[0]
        with handler.lock:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
        print("set" if stop.wait(10) else "unset")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "set"


def test_a_second_signal_exits_at_once_with_its_code():
    out = run_child("""
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(10)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(20)
        print("still running")
    """)
    assert out.returncode == 128 + 15
    assert "still running" not in out.stdout
    assert "second signal" in out.stderr
