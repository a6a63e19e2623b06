"""Writes deploy/grafana/dashboards/ribbon.json, the Ribbon dashboard, from the panel list below.

    python deploy/grafana/build_dashboard.py           # rewrite the JSON
    python deploy/grafana/build_dashboard.py --check   # exit 1 if the JSON differs (tests/deploy/test_dashboard.py)

Rows: throughput, latency by stage, lag, GPU and engine, digest and compaction, errors and dead letters.
Every `ribbon_*` family the worker registers (worker/observability/metrics.py) is on some panel and every panel
queries a series the worker exports; tests/deploy/test_dashboard.py checks both ways. `$I` in an expression is the
instance filter of the dashboard's `instance` variable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards" / "ribbon.json"
DS = {"type": "prometheus", "uid": "prometheus"}
I = 'instance=~"$instance"'  # noqa: E741
R = "$__rate_interval"


def q(metric: str, le: str = "") -> str:
    """A quantile's inner rate: sum by (le) of the histogram's buckets, filtered by instance."""
    return f"sum by (le{le}) (rate({metric}_bucket{{{I}}}[{R}]))"


def quantiles(metric: str, what: str, ps=(0.5, 0.99)) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({p}, {q(metric)})", f"{what} p{int(p * 100)}") for p in ps]


# (row, [(title, description, unit, [(expr, legend[, unit])], kind)]); kind: timeseries (default), stat, table.
# A target's own unit (a third item) overrides the panel's for its series: Grafana draws it on an axis of its
# own, so no axis mixes units (tests/deploy/test_dashboard.py).
ROWS: list[tuple[str, list[tuple]]] = [
    ("Throughput", [
        ("Documents/s", "Input messages polled, summaries committed to the output topic, input offsets committed "
         "(summaries and dead letters), sequences the model finished (documents or chunks).", "ops", [
            (f"sum(rate(ribbon_consumed_messages_total{{{I}}}[{R}]))", "consumed"),
            (f"sum(rate(ribbon_produced_summaries_total{{{I}}}[{R}]))", "summaries committed"),
            (f"sum(rate(ribbon_committed_offsets_total{{{I}}}[{R}]))", "offsets committed"),
            (f"sum(rate(ribbon_model_documents_total{{{I}}}[{R}]))", "model sequences")]),
        ("Tokens/s", "Prompt tokens run through the model, tokens generated, and the raw documents' tokens before "
         "compaction.", "short", [
            (f"sum(rate(ribbon_input_tokens_total{{{I}}}[{R}]))", "prompt"),
            (f"sum(rate(ribbon_output_tokens_total{{{I}}}[{R}]))", "generated"),
            (f"sum(rate(ribbon_document_tokens_total{{{I}}}[{R}]))", "documents (raw)")]),
        ("Transactions/s", "Transactions committed and aborted (exactly_once).", "ops", [
            (f"sum(rate(ribbon_transaction_commits_total{{{I}}}[{R}]))", "committed"),
            (f"sum(rate(ribbon_transaction_aborts_total{{{I}}}[{R}]))", "aborted")]),
    ]),
    ("Latency by stage", [
        ("End to end", "Poll to summary ready, per document.", "s",
         quantiles("ribbon_end_to_end_latency_seconds", "end to end")),
        ("Wait in Kafka", "An input record's age when polled (its timestamp to now).", "s",
         quantiles("ribbon_record_age_seconds", "record age")),
        ("Bin on the model", "One bin, staging to its last output.", "s",
         quantiles("ribbon_bin_seconds", "bin")),
        ("Delivery step", "One transaction (or produce and flush), begin to committed.", "s",
         quantiles("ribbon_delivery_step_seconds", "delivery")),
    ]),
    ("Lag", [
        ("Consumer lag", "High watermark minus the committed offset, per partition: what KEDA scales on.", "short", [
            (f"sum by (topic, partition) (ribbon_consumer_lag_messages{{{I}}})", "{{topic}}/{{partition}}")]),
        ("Fetched, not committed", "Per partition: in the packer, on the model, in finishing or the reorder "
         "buffer.", "short", [
            (f"sum by (topic, partition) (ribbon_fetched_unfinished_messages{{{I}}})", "{{topic}}/{{partition}}")]),
        ("Oldest unfinished input", "Age of the oldest unfinished input holding back its partition's commits; "
         "slow documents are those past kafka.delivery_stuck_s.", "s", [
            (f"max by (topic, partition) (ribbon_held_partition_seconds{{{I}}})", "{{topic}}/{{partition}}"),
            (f"sum(increase(ribbon_slow_documents_total{{{I}}}[5m]))", "slow documents (5 m)", "short")]),
        ("In flight and backpressure", "Messages polled and not committed, finished ones waiting for an earlier "
         "offset, partitions paused by backpressure.", "short", [
            (f"sum by (instance) (ribbon_inflight_messages{{{I}}})", "in flight {{instance}}"),
            (f"sum by (instance) (ribbon_reorder_buffer_messages{{{I}}})", "reorder buffer {{instance}}"),
            (f"sum by (instance) (ribbon_paused_partitions{{{I}}})", "paused partitions {{instance}}")]),
        ("Line windows", "Windows of one-line records open, the records they hold (read, not committed: KEDA "
         "takes them off the lag) and their text (windowing.*), and windows closed per second by the rule that "
         "closed them, and records read late (behind the watermark, windowing.time record/event).", "short", [
            (f"sum by (instance) (ribbon_open_windows{{{I}}})", "open {{instance}}"),
            (f"sum by (instance) (ribbon_window_held_records{{{I}}})", "records held {{instance}}"),
            (f"sum by (instance) (ribbon_window_held_bytes{{{I}}})", "bytes held {{instance}}", "bytes"),
            (f"sum by (reason) (rate(ribbon_windows_closed_total{{{I}}}[{R}]))", "closed/s: {{reason}}", "ops"),
            (f"sum(rate(ribbon_window_late_records_total{{{I}}}[{R}]))", "late records/s", "ops")]),
    ]),
    ("GPU and engine", [
        ("GPU busy", "Fraction of time the model ran.", "percentunit", [
            (f"sum by (instance) (rate(ribbon_gpu_busy_seconds_total{{{I}}}[{R}]))", "{{instance}}")]),
        ("Bins", "Bins run per second and their fill (tokens + generation reserve over the token budget).",
         "percentunit", [
            (f"sum(rate(ribbon_bins_total{{{I}}}[{R}]))", "bins/s", "ops"),
            (f"sum(rate(ribbon_bin_fill_ratio_sum{{{I}}}[{R}])) / sum(rate(ribbon_bin_fill_ratio_count{{{I}}}[{R}]))",
             "mean fill"),
            (f"histogram_quantile(0.5, {q('ribbon_bin_fill_ratio')})", "median fill")]),
        ("Tokens waiting in the packer", "", "short", [
            (f"sum by (instance) (ribbon_pending_tokens{{{I}}})", "{{instance}}")]),
        ("Workers", "Scraped (up), starting (model load, autotune, warm-up) and ready (partitions assigned).",
         "short", [
            ('sum(up{job="ribbon", ' + I + "})", "up"),
            (f"sum(ribbon_starting{{{I}}})", "starting"),
            (f"sum(ribbon_ready{{{I}}})", "ready")]),
        ("Process", "Resident memory and CPU of each worker process (prometheus_client's process collector).",
         "bytes", [
            (f'process_resident_memory_bytes{{job="ribbon", {I}}}', "RSS {{instance}}"),
            (f'rate(process_cpu_seconds_total{{job="ribbon", {I}}}[{R}])', "CPU cores {{instance}}", "short")]),
        ("Garbage-collector pauses", "Python GC pauses in the worker (every thread waits through one).", "s", [
            (f"histogram_quantile(0.99, {q('ribbon_gc_pause_seconds', ', generation')})", "p99 gen {{generation}}"),
            (f"sum by (generation) (rate(ribbon_gc_pause_seconds_count{{{I}}}[{R}]))", "pauses/s gen {{generation}}",
             "ops")]),
        ("Build", "The running build of each worker.", "short", [
            (f"max by (instance, version, torch, transformers, confluent_kafka, python) (ribbon_build_info{{{I}}})",
             "")], "table"),
    ]),
    ("Digest and compaction", [
        ("Digest passes", "CPU seconds per second of the digest passes (digest, highlights, compaction) wherever "
         "they ran, and the ingest thread's time on or waiting for them.", "percentunit", [
            (f"sum(rate(ribbon_digest_seconds_total{{{I}}}[{R}]))", "CPU (cores)", "short"),
            (f"sum(rate(ribbon_digest_wall_seconds_total{{{I}}}[{R}]))", "ingest thread (fraction)")]),
        ("Compaction", "Share of documents the model saw compacted, and prompt tokens over the raw documents' "
         "tokens (below 1: compaction saves model time).", "percentunit", [
            (f"sum(rate(ribbon_compacted_documents_total{{{I}}}[{R}])) / "
             f"sum(rate(ribbon_consumed_messages_total{{{I}}}[{R}]))", "documents compacted"),
            (f"sum(rate(ribbon_input_tokens_total{{{I}}}[{R}])) / "
             f"sum(rate(ribbon_document_tokens_total{{{I}}}[{R}]))", "prompt / raw tokens")]),
    ]),
    ("Errors and dead letters", [
        ("Dead letters by reason", "Messages sent to the dead-letter topic, by error.class.", "ops", [
            (f"sum by (reason) (rate(ribbon_dead_lettered_messages_total{{{I}}}[{R}]))", "{{reason}}")]),
        ("Dead letters waiting on disk", "Dead-letter values spilled to disk until their commit.", "bytes", [
            (f"sum by (instance) (ribbon_spilled_dead_letter_bytes{{{I}}})", "{{instance}}")]),
        ("Model failures", "Bins split after a CUDA OOM, and model failures on a bin (documents retried alone).",
         "short", [
            (f"sum(increase(ribbon_oom_splits_total{{{I}}}[5m]))", "OOM splits (5 m)"),
            (f"sum(increase(ribbon_model_errors_total{{{I}}}[5m]))", "model errors (5 m)")]),
        ("Internal errors", "Inputs whose processing raised inside ingest: dead-lettered as internal_error while "
         "the stage went on (a bug to report), by stage and exception type.", "short", [
            (f"sum by (stage, exception) (increase(ribbon_internal_errors_total{{{I}}}[5m]))",
             "{{stage}}: {{exception}} (5 m)")]),
        ("Ungrounded model text", "Model summaries holding an identifier found in neither the document nor its "
         "digest, those identifiers, the sentences dropped for them, and summaries replaced by the digest "
         "rendering (generation.grounding).", "short", [
            (f"sum(increase(ribbon_ungrounded_summaries_total{{{I}}}[5m]))", "summaries (5 m)"),
            (f"sum(increase(ribbon_ungrounded_identifiers_total{{{I}}}[5m]))", "identifiers (5 m)"),
            (f"sum(increase(ribbon_ungrounded_sentences_dropped_total{{{I}}}[5m]))", "sentences dropped (5 m)"),
            (f"sum(increase(ribbon_ungrounded_fallbacks_total{{{I}}}[5m]))", "fell back to the digest (5 m)")]),
        ("Published summaries by gate reason", "Which text each summary is: the model's (passed the publish "
         "gate) or the digest rendering, by the gate's first failed check (loop, grounded, copy, content, fact) "
         "or digest_mode (docs/prompt.md).", "short", [
            (f"sum by (source, reason) (increase(ribbon_summaries_published_total{{{I}}}[5m]))",
             "{{source}}: {{reason}} (5 m)")]),
        ("Refused and unreadable records", "Inputs committed with no output and no dead letter (even the "
         "smallest dead letter was refused), consumer errors tied to one offset (bad compression, corrupt batch: "
         "a dead letter after 5 tries), and secrets redacted by kind (counts, never values).", "short", [
            (f"sum by (reason) (increase(ribbon_skipped_records_total{{{I}}}[5m]))", "skipped: {{reason}} (5 m)"),
            (f"sum by (error) (increase(ribbon_consume_errors_total{{{I}}}[5m]))", "consume errors: {{error}} (5 m)"),
            (f"sum by (kind) (increase(ribbon_redactions_total{{{I}}}[5m]))", "redacted: {{kind}} (5 m)")]),
        ("Partitions without commits", "Per partition: seconds with input waiting and no commit "
         "(pipeline.stall_timeout_s turns /readyz 503; twice it ends the worker).", "s", [
            (f"max by (topic, partition) (ribbon_partition_stalled_seconds{{{I}}})", "{{topic}}/{{partition}}")]),
        ("Alerts firing", "Ribbon's alert rules that fire now (deploy/prometheus-rules.yml).", "short", [
            ('sum by (alertname, severity, instance) (ALERTS{alertstate="firing", alertname=~"Ribbon.*"})', "")],
         "table"),
    ]),
]


def panel(pid: int, x: int, y: int, title: str, desc: str, unit: str, targets, kind: str = "timeseries") -> dict:
    p = {"id": pid, "type": kind, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"x": x, "y": y, "w": 12, "h": 8},
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": [
             {"matcher": {"id": "byFrameRefID", "options": chr(ord("A") + i)},
              "properties": [{"id": "unit", "value": t[2]}]} for i, t in enumerate(targets) if len(t) > 2]},
         "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": t[0], "legendFormat": t[1],
                      **({"instant": True, "format": "table"} if kind == "table" else {})}
                     for i, t in enumerate(targets)]}
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"fillOpacity": 10, "stacking": {"mode": "none"}}
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
    return p


def build() -> dict:
    panels, pid, y = [], 1, 0
    for row, items in ROWS:
        panels.append({"id": pid, "type": "row", "title": row, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, (title, desc, unit, targets, *kind) in enumerate(items):
            panels.append(panel(pid, 12 * (i % 2), y + 8 * (i // 2), title, desc, unit, targets, *kind))
            pid += 1
        y += 8 * ((len(items) + 1) // 2)
    instance = {"name": "instance", "type": "query", "datasource": DS, "label": "worker",
                "query": {"query": "label_values(ribbon_build_info, instance)", "refId": "instance"},
                "definition": "label_values(ribbon_build_info, instance)", "includeAll": True, "multi": True,
                "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "refresh": 2, "sort": 1}
    return {"uid": "ribbon", "title": "Ribbon", "tags": ["ribbon", "kafka", "gpu"], "timezone": "utc",
            "schemaVersion": 39, "version": 2, "editable": False, "refresh": "10s",
            "time": {"from": "now-1h", "to": "now"}, "templating": {"list": [instance]},
            "annotations": {"list": []}, "panels": panels}


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if OUT.read_text() != render():
            print(f"{OUT} is stale: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(render())
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
