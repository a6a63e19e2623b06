"""Prometheus metrics (base units, _total/_seconds) and the /metrics, /healthz, /readyz server."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.consumed = Counter("ribbon_consumed_messages_total", "input messages polled", registry=r)
        self.produced = Counter("ribbon_produced_summaries_total", "summaries committed to the output topic",
                                registry=r)
        self.dead_lettered = Counter("ribbon_dead_lettered_messages_total", "messages sent to the dead-letter topic",
                                     ["reason"], registry=r)
        self.input_tokens = Counter("ribbon_input_tokens_total", "prompt tokens run through the model", registry=r)
        self.output_tokens = Counter("ribbon_output_tokens_total", "tokens generated", registry=r)
        self.bins = Counter("ribbon_bins_total", "bins run on the model", registry=r)
        self.bin_fill = Histogram("ribbon_bin_fill_ratio", "bin weight over the token budget", registry=r,
                                  buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0))
        self.latency = Histogram("ribbon_end_to_end_latency_seconds", "poll to summary ready", registry=r,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120))
        self.gpu_seconds = Counter("ribbon_gpu_busy_seconds_total", "time the model ran", registry=r)
        self.pending_tokens = Gauge("ribbon_pending_tokens", "tokens waiting in the packer", registry=r)
        self.reorder = Gauge("ribbon_reorder_buffer_messages", "finished messages waiting for an earlier offset",
                             registry=r)
        self.inflight = Gauge("ribbon_inflight_messages", "messages polled and not yet committed", registry=r)
        self.paused = Gauge("ribbon_paused_partitions", "partitions paused by backpressure", registry=r)
        self.lag = Gauge("ribbon_consumer_lag_messages", "high watermark minus position", ["topic", "partition"],
                         registry=r)
        self.txn_commits = Counter("ribbon_transaction_commits_total", "transactions committed", registry=r)
        self.txn_aborts = Counter("ribbon_transaction_aborts_total", "transactions aborted", registry=r)
        self.oom_splits = Counter("ribbon_oom_splits_total", "bins split after a CUDA out-of-memory", registry=r)
        self.model_errors = Counter("ribbon_model_errors_total", "model failures on a bin (retried alone)",
                                    registry=r)
        self.ready = False
        self.gpu_heartbeat = time.monotonic()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """Serves /metrics, /healthz (the GPU loop is alive) and /readyz (model loaded, partitions assigned)."""

    def __init__(self, metrics: Metrics, host: str, port: int, stuck_after_s: float = 120.0,
                 busy: callable = lambda: False) -> None:
        self.metrics, self.stuck_after_s, self.busy = metrics, stuck_after_s, busy
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                code, ctype, body = server.respond(self.path)
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ribbon-http", daemon=True)

    def healthy(self) -> bool:
        idle = time.monotonic() - self.metrics.gpu_heartbeat
        return idle < self.stuck_after_s or not self.busy()

    def respond(self, path: str) -> tuple[int, str, bytes]:
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.metrics.render()
        if path == "/healthz":
            ok = self.healthy()
            return (200 if ok else 503), "text/plain", (b"ok\n" if ok else b"gpu loop stuck\n")
        if path == "/readyz":
            ok = self.metrics.ready
            return (200 if ok else 503), "text/plain", (b"ready\n" if ok else b"not ready\n")
        return 404, "text/plain", b"not found\n"

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
