"""SIGUSR1 prints every thread's stack and the process goes on (worker/observability/stacks.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys, threading
    from worker.observability.stacks import dump_stacks_on_usr1
    dump_stacks_on_usr1()
    go = threading.Event()
    def waiting_for_the_broker():
        go.wait()
    t = threading.Thread(target=waiting_for_the_broker, name="helper")
    t.start()
    print("ready", flush=True)
    sys.stdin.readline()          # the test sends SIGUSR1, then a line
    go.set()
    t.join()
    print("still running", flush=True)
""")


def test_usr1_prints_every_threads_stack_and_the_process_goes_on():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGUSR1)
        err = ""
        while "waiting_for_the_broker" not in err:   # faulthandler writes the dump before the next line
            line = p.stderr.readline()
            assert line, f"no stack dump on stderr: {err!r}"
            err += line
        p.stdin.write("\n")
        p.stdin.flush()
        out, rest = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert out.strip() == "still running" and p.returncode == 0
    assert "Current thread" in err or "Thread 0x" in err
