"""The finishing stage with fakes of its neighbours: outputs, chunk hand-back, dead letters, backpressure."""

from __future__ import annotations

import dataclasses
import threading

import orjson
import pytest

from stage_fakes import Generated, Wake, make_doc, registered
from worker.pipeline.configs import finishing_config
from worker.kafka.headers import parse_dead_letter_headers
from worker.pipeline.deadletter import DeadLetters
from worker.pipeline.inflight import DocRegistry
from worker.pipeline.finishing import Finishing
from worker.pipeline.stage import Shared
from worker.observability.metrics import Metrics
from worker.pipeline.tracker import OffsetTracker
from worker.config.settings import load_settings


@pytest.fixture
def stage():
    tracker, registry, metrics, wake = OffsetTracker(), DocRegistry(), Metrics(), Wake()
    combined: list = []
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: metrics.dead_lettered.labels(c).inc(),
                     wake=wake)
    fin = Finishing(config=dataclasses.replace(finishing_config(load_settings(environ={}), "m"), output_topic="out", capacity=2),
                    shared=Shared(tracker, registry, metrics, dl), combine=combined.append, wake=wake)
    return fin, tracker, registry, wake, combined


def run_until_idle(fin: Finishing) -> None:
    fin.stop()
    fin.run()  # finishes what is queued, then returns
    assert fin.error is None


def test_a_finished_bin_becomes_outputs_with_key_headers_and_offsets(stage):
    fin, tracker, registry, wake, _ = stage
    docs = [make_doc(tracker, offset=o) for o in (0, 1)]
    sids = [registered(registry, d, [[1, 2, 3]])[0] for d in docs]
    seqs = [registry.pop(s) for s in sids]
    assert fin.submit_bin([(seqs[1], Generated(" second ", [5, 6])), (seqs[0], Generated("first", [7]))], 0.5)
    run_until_idle(fin)
    (ready,) = tracker.take_ready()
    assert ready.offsets == (0, 1) and wake.n == 1  # one wake per bin: delivery takes both in one transaction
    out = [orjson.loads(r.value) for r in ready.records]
    assert [o["input"]["offset"] for o in out] == [0, 1]
    # one word each: the publish gate publishes the digest rendering instead, and says why
    assert [(o["summary"]["source"], o["summary"]["reason"]) for o in out] == [("digest", "content")] * 2
    assert "line b" in out[0]["summary"]["text"]
    assert out[0]["tokens"]["output"] == 1 and out[0]["timing_ms"]["gpu"] == 500.0
    assert ready.records[0].key == b"k" and ready.records[0].topic == "out"
    assert dict(ready.records[0].headers)["source.offset"] == b"0"
    assert ("traceparent", b"00-abc") in ready.records[0].headers


def test_a_failed_document_is_dead_lettered_by_the_one_function(stage):
    fin, tracker, registry, _, _ = stage
    doc = make_doc(tracker, offset=3)
    (sid,) = registered(registry, doc, [[1, 2]])
    fin.submit_bin([(registry.pop(sid), RuntimeError("kernel failed"))], 0.1)
    run_until_idle(fin)
    (ready,) = tracker.take_ready()
    (rec,) = ready.records
    assert rec.topic == "dlq" and rec.value == doc.raw
    h = parse_dead_letter_headers(rec.headers)
    assert h.error_class == "model_error" and "kernel failed" in h.error_message and h.source_offset == "3"


def test_an_output_that_cannot_be_built_is_dead_lettered_and_the_stage_goes_on(stage, monkeypatch):
    fin, tracker, registry, _, _ = stage
    bad, good = make_doc(tracker, offset=0), make_doc(tracker, offset=1)
    bad.meta = {"attributes": "not a mapping"}  # fails the output model's validation
    fin.submit_finished(bad, "x")
    fin.submit_finished(good, "fine")
    run_until_idle(fin)
    (ready,) = tracker.take_ready()
    assert [r.topic for r in ready.records] == ["dlq", "out"]
    assert parse_dead_letter_headers(ready.records[0].headers).error_class == "output_error"


def test_chunk_rounds_go_back_to_ingest_until_the_final_one(stage):
    fin, tracker, registry, _, combined = stage
    doc = make_doc(tracker, offset=0)
    sids = registered(registry, doc, [[1], [2], [3]])
    seqs = [registry.pop(s) for s in sids]
    fin.submit_bin([(s, Generated(f"part {s.index}", [1])) for s in seqs[:2]], 0.1)
    fin.submit_bin([(seqs[2], Generated("part 2", [1]))], 0.1)
    run_until_idle(fin)
    assert combined == [doc] and tracker.take_ready() == []  # handed back once, nothing output yet
    assert doc.parts == {0: "part 0", 1: "part 1", 2: "part 2"}


def test_revoked_documents_are_dropped(stage):
    fin, tracker, registry, wake, _ = stage
    doc = make_doc(tracker, offset=0)
    (sid,) = registered(registry, doc, [[1]])
    seq = registry.pop(sid)
    tracker.revoke(doc.tp)
    fin.submit_bin([(None, Generated("gone", [1])), (seq, Generated("late", [1]))], 0.1)
    run_until_idle(fin)
    assert tracker.take_ready() == [] and wake.n == 0


def test_submit_blocks_while_full_and_returns_false_once_stopping(stage):
    fin, tracker, _, _, _ = stage
    doc = make_doc(tracker)
    assert fin.submit_finished(doc, "a") and fin.submit_finished(doc, "b")  # capacity 2
    done = threading.Event()
    result: list[bool] = []
    t = threading.Thread(target=lambda: (result.append(fin.submit_finished(doc, "c")), done.set()))
    t.start()
    assert not done.wait(0.3)  # the third waits: backpressure, not unbounded buffering
    fin.stop()
    t.join(5)
    assert result == [False] and fin.queued() == 2


def test_an_outputs_timing_says_where_its_time_went():
    from worker.pipeline.outputs import build_output

    doc = make_doc(OffsetTracker())
    doc.received, doc.packed, doc.first_gpu, doc.model_end = 100.0, 100.01, 100.25, 100.5
    t = build_output(doc, "s", config=finishing_config(load_settings(environ={}), "m"), now=100.6).timing_ms
    assert (t.ingest, t.queued, t.model_done, t.total) == pytest.approx((10.0, 250.0, 500.0, 600.0))
    doc.packed = doc.model_end = None  # digest mode: no packer, no bin
    t = build_output(doc, "s", config=finishing_config(load_settings(environ={}), "m"), now=100.6).timing_ms
    assert (t.ingest, t.model_done) == (0.0, 0.0)
