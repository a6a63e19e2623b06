"""The Grafana dashboard against the metrics the worker registers, both ways.

- every `ribbon_*` family that Metrics() registers is queried by some panel;
- every panel queries at least one series the worker exports (or Prometheus' own `up` / `ALERTS`), and no
  query names a series that does not exist;
- the rows an operator looks for are there, and the JSON is what deploy/grafana/build_dashboard.py writes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from worker.observability.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DASH = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "ribbon.json").read_text())
PROMETHEUS_OWN = {"up", "ALERTS"}
_NAME = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[|\))")


def _families_and_series() -> tuple[dict[str, set[str]], set[str]]:
    """family -> its series names, for what Metrics() registers (histograms: _bucket/_sum/_count, ...)."""
    fams: dict[str, set[str]] = {}
    for fam in Metrics().registry.collect():
        names = {s.name for s in fam.samples}
        names |= {fam.name + suf for suf in {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                                             "gauge": ("",), "info": ("_info",)}.get(fam.type, ())}
        fams[fam.name] = names
    return fams, set().union(*fams.values())


def _metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (identifiers followed by a selector, range or closing paren that
    are not functions or label names)."""
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\bby \([^)]*\)", "", expr)  # grouping labels
    return {n for n in _NAME.findall(expr) if n.startswith(("ribbon_", "process_", "python_")) or n in PROMETHEUS_OWN}


def _panels() -> list[dict]:
    return [p for p in DASH["panels"] if p["type"] != "row"]


def test_every_panel_queries_an_exported_series():
    _, series = _families_and_series()
    for p in _panels():
        used = set().union(*(_metric_names(t["expr"]) for t in p["targets"]))
        assert used, f"panel {p['title']!r} queries no metric"
        unknown = used - series - PROMETHEUS_OWN
        assert not unknown, f"panel {p['title']!r} queries {sorted(unknown)}, which the worker does not export"


def test_every_product_metric_family_is_on_some_panel():
    fams, _ = _families_and_series()
    used = set().union(*(_metric_names(t["expr"]) for p in _panels() for t in p["targets"]))
    missing = [f for f, names in fams.items() if f.startswith("ribbon_") and not names & used]
    assert missing == [], f"metric families on no panel: {missing}"


def test_the_check_sees_a_missing_family_and_an_unknown_metric():
    assert _metric_names('sum by (le) (rate(ribbon_x_bucket{instance=~"$i"}[5m]))') == {"ribbon_x_bucket"}
    assert _metric_names("histogram_quantile(0.5, sum by (le, generation) (rate(a[1m])))") == set()
    assert _metric_names('up{job="ribbon"} + process_open_fds') == {"up"}  # a name needs a selector, range or )


def test_rows_an_operator_looks_for():
    rows = [p["title"] for p in DASH["panels"] if p["type"] == "row"]
    assert rows == ["Throughput", "Latency by stage", "Lag", "GPU and engine", "Digest and compaction",
                    "Errors and dead letters"]
    assert len({p["id"] for p in DASH["panels"]}) == len(DASH["panels"])
    assert all(re.search(r'instance=~"\$instance"', t["expr"]) for p in _panels() for t in p["targets"]
               if "ALERTS" not in t["expr"]), "every query follows the worker selector"


def test_the_json_is_the_generators():
    res = subprocess.run([sys.executable, str(ROOT / "deploy" / "grafana" / "build_dashboard.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def _unit_of(expr: str) -> str:
    """What a query measures, from its metric names: bytes, seconds, a ratio, or a count (or rate)."""
    names = _metric_names(expr)
    rated = "rate(" in expr or "increase(" in expr
    if " / " in expr or any("_ratio" in n for n in names):
        return "ratio"
    if "histogram_quantile" in expr:
        return "seconds" if any(n.endswith("_seconds_bucket") for n in names) else "count"
    if not rated and any(n.endswith("_bytes") for n in names):
        return "bytes"
    if not rated and any(n.endswith("_seconds") for n in names):
        return "seconds"
    return "count"


ALLOWED = {"bytes": {"bytes"}, "seconds": {"s"}, "ratio": {"percentunit"},
           "count": {"short", "ops", "none", "percentunit"}}  # percentunit: busy seconds per second


def test_no_panel_mixes_units():
    """Each series is drawn in the unit of what it measures: the panel's unit, or its target's override."""
    for p in _panels():
        overrides = {o["matcher"]["options"]: o["properties"][0]["value"] for o in p["fieldConfig"]["overrides"]}
        units = set()
        for t in p["targets"]:
            unit = overrides.get(t["refId"], p["fieldConfig"]["defaults"]["unit"])
            assert unit in ALLOWED[_unit_of(t["expr"])], f"{p['title']!r}: {t['legendFormat']!r} drawn as {unit}"
            units.add(unit)
        assert len(units - {"short", "ops"}) <= 2, f"{p['title']!r}: more than two axes"


def test_the_unit_check_sees_a_mix():
    assert _unit_of('sum(ribbon_window_held_bytes{instance=~"$i"})') == "bytes"
    assert _unit_of('max(ribbon_held_partition_seconds{x=""})') == "seconds"
    assert _unit_of('sum(increase(ribbon_slow_documents_total{x=""}[5m]))') == "count"
    assert _unit_of('histogram_quantile(0.9, sum by (le) (rate(ribbon_gc_pause_seconds_bucket{x=""}[1m])))') == "seconds"
