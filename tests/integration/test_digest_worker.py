"""Digest mode and compaction through the whole worker and the embedded broker."""

from __future__ import annotations

import json
import signal
import uuid

import jsonschema
import orjson
from google.protobuf.json_format import ParseDict
from helpers import ROOT, by_id, consume_all, on_both_brokers, produce, start_worker, topics, worker_env

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.render import render
from worker.demo.samples import labelled, mixed_corpus

BAD = [(b"\xff\xfe\xfa", "invalid_utf8"), (b'{"text": "unterminated', "invalid_json"), (b'{"lines": []}', "empty_text"), (b'{"text": 42}', "schema"),
       (b'{"text": "   "}', "empty_text"), (b"[1, 2, 3]", "not_an_object"),
       (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [7]}]}]}', "invalid_otlp")]
# an OpenTelemetry Collector Kafka exporter's record: one logs export request, as otlp_json and as otlp_proto
OTLP = {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "amf-2"}}]},
                          "scopeLogs": [{"logRecords": [
                              {"timeUnixNano": str(1764583200000000000 + i * 10**9), "severityNumber": 17 if i == 1 else 9,
                               "body": {"stringValue": "registration reject" if i == 1 else f"batch {i} sent"}}
                              for i in range(3)]}]}]}
IN_THREAD = PrepareOptions(highlights=3, compaction=False, min_saving=0.2, render=True)


def _run(broker, t, values, env, tmp_path, n_out: int, n_dlq: int):
    produce(broker.bootstrap, t["input_topic"], values)
    proc = start_worker(env, tmp_path / "worker.log")
    try:
        got = consume_all(broker.bootstrap, t["output_topic"], n_out, timeout_s=240, isolation="read_committed")
        dlq = consume_all(broker.bootstrap, t["dlq_topic"], n_dlq, timeout_s=30 if n_dlq else 2,
                          isolation="read_committed")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(90)
    assert rc == 0, (tmp_path / "worker.log").read_text()[-3000:]
    return got, dlq


@on_both_brokers
def test_digest_mode_runs_without_a_model_one_output_each_and_bad_input_to_the_dlq(cluster, cluster_topic, tmp_path):
    t, broker = topics(cluster_topic), cluster
    docs = mixed_corpus(300, seed=5)
    proto = ParseDict(OTLP, ExportLogsServiceRequest()).SerializeToString()
    values = [orjson.dumps(d) for d in docs] + [orjson.dumps(OTLP), proto] + [v for v, _ in BAD]
    # the preprocessing pool (2 processes): each output equals the in-thread pass of the same document
    env = worker_env(broker.bootstrap, "/no/model/needed", group=f"g-{uuid.uuid4().hex[:8]}",
                     RIBBON_MODEL__MODE="digest", RIBBON_PIPELINE__PREPROCESS_PROCESSES="2", **t)
    got, dlq = _run(broker, t, values, env, tmp_path, len(docs) + 2, len(BAD))
    assert "2 preprocess processes" in (tmp_path / "worker.log").read_text()
    outs = by_id(got)
    otlp = [outs.pop(k)[0] for k in [k for k in outs if k.startswith(t["input_topic"] + ":")]]
    assert len(otlp) == 2 and otlp[0]["digest"] == otlp[1]["digest"] and otlp[0]["summary"] == otlp[1]["summary"]
    assert (otlp[0]["source"], otlp[0]["kind"], otlp[0]["digest"]["lines"]) == ("amf-2", "log", 3)
    assert otlp[0]["digest"]["severity"] == {"ERROR": 1, "INFO": 2}
    assert otlp[0]["highlights"][0] == "2025-12-01T10:00:01.000Z ERROR [amf-2] registration reject"
    assert set(outs) == {d["id"] for d in docs} and all(len(v) == 1 for v in outs.values())
    schema = json.loads((ROOT / "schemas" / "output.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    src = {d["id"]: d for d in docs}
    for (o,) in outs.values():
        validator.validate(o)
        d = src[o["id"]]
        assert (o["mode"], o["model"], o["schema_version"]) == ("digest", "digest", 5)
        assert o["summary"] == {"text": render(o["digest"], d["source"], d["kind"]), "source": "digest",
                                "reason": "digest_mode"}
        mine = prepare("\n".join(d["lines"]), d["source"], d["kind"], IN_THREAD)
        assert (o["summary"]["text"], o["highlights"]) == (mine.summary, mine.highlights)
        assert o["digest"] == orjson.loads(orjson.dumps(mine.digest))
        assert o["digest"]["lines"] == sum(1 for ln in d["lines"] if ln.strip())
        assert o["tokens"] == {"input": 0, "document": 0, "output": 0, "chunks": 1}
    assert sorted(dict(m.headers())["error.class"].decode() for m in dlq) == sorted(c for _, c in BAD)
    assert {m.value() for m in dlq} == {v for v, _ in BAD}


def test_generative_mode_gives_the_model_the_compacted_document(broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic)
    samples = [labelled(kind, 0, 400) for kind in ("nf", "syslog", "procedure")]
    short = mixed_corpus(6, seed=3)[:5]
    values = [orjson.dumps(s.message) for s in samples] + [orjson.dumps(d) for d in short]
    env = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}",
                     RIBBON_PIPELINE__PREPROCESS_PROCESSES="2", **t)  # compaction in the pool
    got, _ = _run(broker, t, values, env, tmp_path, len(values), 0)
    outs = {k: v[0] for k, v in by_id(got).items()}
    assert len(outs) == len(values)
    for s in samples:
        o = outs[s.message["id"]]
        assert o["tokens"]["chunks"] == 1 and 3 * o["tokens"]["input"] <= o["tokens"]["document"]
        assert o["digest"]["templates_total"] == s.templates
        assert set(s.faults) <= set(o["highlights"]) | {f["example"] for f in o["digest"]["failures"]}
    env_off = worker_env(broker.bootstrap, tiny_model, group=f"g-{uuid.uuid4().hex[:8]}",
                         RIBBON_DIGEST__COMPACTION="false", **{**t, "output_topic": new_topic("out-raw")})
    t_off = {**t, "output_topic": env_off["RIBBON_KAFKA__OUTPUT_TOPIC"], "input_topic": new_topic("in-raw", 3)}
    env_off["RIBBON_KAFKA__INPUT_TOPICS"] = t_off["input_topic"]
    got_off, _ = _run(broker, t_off, [orjson.dumps(samples[0].message)], env_off, tmp_path, 1, 0)
    (o_off,) = [orjson.loads(m.value()) for m in got_off]
    assert o_off["tokens"]["document"] == outs[samples[0].message["id"]]["tokens"]["document"]
    assert o_off["tokens"]["input"] >= o_off["tokens"]["document"]  # raw: the model got it all (maybe in chunks)
