"""The metrics and health server: prometheus_client's exposition, idle timeouts, no tracebacks, safe bind."""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import wait_for
from prometheus_client.parser import text_string_to_metric_families

from worker.observability.metrics import HealthServer, Metrics
from worker.config.settings import load_settings


@pytest.fixture
def server():
    metrics = Metrics()
    srv = HealthServer(metrics, "127.0.0.1", 0).start()  # the default idle timeout (5 s)
    yield srv
    srv.stop()


def get(srv: HealthServer, path: str, headers: dict[str, str] | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_metrics_take_query_strings_gzip_and_openmetrics(server):
    code, _, body = get(server, "/metrics?x=1")
    assert code == 200
    samples = {s.name: s for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert {"ribbon_consumed_messages_total", "process_cpu_seconds_total", "process_resident_memory_bytes",
            "python_info", "ribbon_build_info"} <= set(samples)
    labels = samples["ribbon_build_info"].labels
    assert labels["version"] and labels["python"] and labels["torch"] != ""

    code, _, body = get(server, "/metrics?name[]=ribbon_bins_total")
    assert code == 200 and b"ribbon_bins_total" in body and b"process_cpu" not in body

    code, headers, body = get(server, "/metrics", {"Accept-Encoding": "gzip"})
    assert headers.get("Content-Encoding") == "gzip" and b"ribbon_bins_total" in gzip.decompress(body)

    code, headers, body = get(server, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")


def test_probes_and_unknown_paths(server):
    assert get(server, "/healthz")[::2] == (200, b"ok\n")
    assert get(server, "/readyz")[::2] == (503, b"not ready\n")
    server.metrics.ready = True
    assert get(server, "/readyz?verbose=1")[::2] == (200, b"ready\n")
    assert get(server, "/nothing")[0] == 404


def _http_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("Thread-") and t.daemon)


def test_idle_connections_are_closed_and_their_threads_end(server):
    base = _http_threads()
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(30)]
    try:
        wait_for(lambda: _http_threads() >= base + 30, 10, "one handler thread per open connection")
        t0 = time.monotonic()
        for s in socks:  # the server closes each after the idle timeout: recv sees EOF
            s.settimeout(30)
            assert s.recv(1) == b""
        assert time.monotonic() - t0 < 15
        deadline = time.monotonic() + 5
        while _http_threads() > base and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _http_threads() <= base
    finally:
        for s in socks:
            s.close()
    assert get(server, "/healthz")[0] == 200


def test_reset_requests_print_no_traceback(server, capfd):
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # headers not finished
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.close()  # connect and leave at once
    assert get(server, "/healthz")[0] == 200  # answered after the server accepted every connection above
    wait_for(lambda: not [t for t in threading.enumerate() if "process_request_thread" in t.name], 10,
             "the server's handler threads to end")
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Exception" not in out + err


def test_default_bind_is_loopback_and_a_busy_port_is_one_line(tmp_path: Path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert load_settings(empty, environ={}).server.host == "127.0.0.1"
    from worker.config.errors import StartupError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(StartupError) as err:
            HealthServer(Metrics(), "127.0.0.1", busy.getsockname()[1])
    assert "server.port (RIBBON_SERVER__PORT)" in str(err.value) and "\n" not in str(err.value)
