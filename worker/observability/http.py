"""The /metrics, /healthz and /readyz server: prometheus_client's WSGI app behind a threading server.

/metrics is prometheus_client's own `make_wsgi_app`, so query strings
(`?name[]=...`), gzip (`Accept-Encoding`) and OpenMetrics (`Accept`) work as
Prometheus expects. The server is wsgiref's, threaded, with two operator-facing
limits that the stock one lacks:

- an idle or slow connection is closed after `idle_timeout_s` (a socket timeout
  on the handler), so idle clients cannot pile up threads;
- a client that resets or times out is one DEBUG log line, never a traceback.

Why not `prometheus_client.start_http_server`: it has no socket timeout and no
extra routes, and it prints a traceback for every reset connection.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]  # -> (ok, text)
StartResponse = Callable[..., Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64  # listen backlog (socketserver's default is 5)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer that resets, or stays idle past the timeout, is the client's business: no traceback.
        exc = sys.exc_info()[1]
        log.debug("http client %s: %s", client_address, exc.__class__.__name__ if exc else "error")


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


def _handler(idle_timeout_s: float) -> type[WSGIRequestHandler]:
    class Handler(WSGIRequestHandler):
        timeout = idle_timeout_s  # StreamRequestHandler sets it on the socket

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            pass

    return Handler


class HttpServer:
    """Serves `registry` on /metrics and the given probes on their paths, in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, probes: dict[str, Probe],
                 idle_timeout_s: float = 5.0) -> None:
        self.probes = probes
        self.metrics_app = make_wsgi_app(registry)
        server_class = _IPv6Server if ":" in host else _Server
        self.httpd = make_server(host, port, self.app, server_class=server_class,
                                 handler_class=_handler(idle_timeout_s))
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ribbon-http", daemon=True)

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return self.metrics_app(environ, start_response)
        probe = self.probes.get(path)
        if probe is None:
            return _plain(start_response, "404 Not Found", b"not found\n")
        ok, text = probe()
        return _plain(start_response, "200 OK" if ok else "503 Service Unavailable", text.encode() + b"\n")

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]
