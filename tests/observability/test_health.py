"""Health as sources report it and as the probes combine it: any source not live fails /healthz, any
not ready fails /readyz, each naming why; a new source joins by being added to the list."""

from __future__ import annotations

from worker.observability.health import HEALTHY, Health, combine
from worker.observability.metrics import HealthServer, Metrics, Probes


def test_combined_health_is_live_and_ready_only_when_every_source_is_and_names_each_reason():
    assert combine([]) == HEALTHY and combine([HEALTHY, HEALTHY]) == HEALTHY
    h = combine([HEALTHY, Health(ready=False, why="no partitions assigned"), Health(live=False, why="stuck")])
    assert (h.live, h.ready) == (False, False) and h.why == "no partitions assigned; stuck"


def test_the_probes_answer_from_a_list_of_sources_that_can_grow():
    sources = [lambda: HEALTHY]
    metrics = Metrics()
    server = HealthServer(metrics, "127.0.0.1", 0, Probes(health=lambda: combine(s() for s in sources)))
    try:
        assert server.readiness() == (True, "ready") and server.health() == (True, "ok")
        sources.append(lambda: Health(ready=False, why="partition in/0 has not committed for 60 s"))
        assert server.readiness() == (False, "not ready: partition in/0 has not committed for 60 s")
        assert server.health() == (True, "ok")
        metrics.starting = True
        assert server.health() == (False, "starting (model load, autotune, warm-up)")
    finally:
        server.http.httpd.server_close()
