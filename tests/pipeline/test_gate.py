"""The publish gate (worker/pipeline/gate.py) through the output message: each failure of the issue
(a loop of tokens without letters, a content-free text, an ungrounded time, an ungrounded CamelCase
name, a copied line, a text that names no failure) publishes the digest rendering, and says why."""

from __future__ import annotations

import dataclasses
import pytest

from worker.pipeline.configs import finishing_config
from worker.config.settings import load_settings
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.render import render
from worker.observability.metrics import Metrics
from worker.pipeline.gate import judge, loops
from worker.pipeline.inflight import Doc
from worker.pipeline.outputs import build_output

DOC = "\n".join([
    "2026-03-01T21:06:40Z amf-2 INFO registration accepted for imsi-001010000000001",
    "2026-03-01T21:06:41Z amf-2 INFO registration accepted for imsi-001010000000002",
    "2026-03-01T21:06:44Z amf-2 INFO registration accepted for imsi-001010000000003",
    "2026-03-01T21:07:12Z amf-2 ERROR N2 setup failed towards gnb-017: SCTP association lost",
    "2026-03-01T21:07:13Z smf-1 WARN PFCP session modify timeout towards upf-1 after 3 retransmissions",
    "2026-03-01T21:07:20Z amf-2 INFO registration accepted for imsi-001010000000004",
])
GOOD = ("amf-2 lost its SCTP association to gnb-017 at 21:07:12, so N2 setup failed; smf-1 then timed out "
        "modifying a PFCP session towards upf-1.")


def _out(text: str, **overrides):
    s = load_settings(environ={}, overrides={"model.path": "tiny-random", **overrides})
    doc = Doc(tp=("t", 0), epoch=0, offset=1, key=None, doc_id="t:0:1", text=DOC, meta={"source": "amf-2"},
              received=0.0, prepared=prepare(DOC, "amf-2", "log", PrepareOptions(3, False, 0.0, False)))
    return build_output(doc, text, config=finishing_config(s, "m"), now=1.0), doc


def test_a_summary_that_names_the_failure_in_grounded_words_is_published():
    msg, _ = _out(GOOD)
    assert (msg.summary.source, msg.summary.reason, msg.summary.text) == ("model", "passed", GOOD)


@pytest.mark.parametrize("text,reason", [
    ("[1] " * 40, "loop"),                                             # tokens without letters, 128 of them
    ("The time is 21:00:00:00:00:00:00:00:00:00", "loop"),
    ("N2 setup failed on amf-2. N2 setup failed on amf-2. N2 setup failed on amf-2.", "loop"),
    ("Theme:", "content"),
    ("", "content"),                                                   # a loop cut at its first token
    ("The log is:", "content"),
    ("The N2 setup on amf-2 failed at 05:00:00.", "grounded"),           # a time in no line
    ("amf-2 sent SMContextStateChangeRequestTransfer to smf-1 and the N2 setup failed.", "grounded"),
    ("amf-2 ERROR N2 setup failed towards gnb-017: SCTP association lost", "copy"),
    ("The log shows: N2 setup failed towards gnb-017: SCTP association lost.", "copy"),
    ("Registrations were accepted for several subscribers on amf-2 during the period.", "fact"),
])
def test_a_text_that_fails_a_check_publishes_the_digest_and_says_which(text, reason):
    msg, doc = _out(text)
    assert (msg.summary.source, msg.summary.reason) == ("digest", reason)
    assert msg.summary.text == render(doc.prepared.digest, "amf-2", None)


def test_with_grounding_mark_an_unverified_sentence_is_published_marked():
    """generation.grounding = mark publishes such sentences on purpose: the gate leaves grounding to it."""
    msg, _ = _out(GOOD + " Recovery came at 05:00:00.", **{"generation.grounding": "mark"})
    assert msg.summary.source == "model" and "[unverified: 05:00:00]" in msg.summary.text


def test_a_partly_ungrounded_summary_keeps_its_grounded_sentences():
    msg, _ = _out(GOOD + " Recovery came from SMContextStatusNotify at 05:00:00.")
    assert (msg.summary.source, msg.summary.text) == ("model", GOOD)
    assert msg.grounding.unsupported == ["SMContextStatusNotify", "05:00:00"]


def test_digest_mode_says_so():
    msg, _ = _out("ignored", **{"model.mode": "digest"})
    assert (msg.summary.source, msg.summary.reason) == ("digest", "digest_mode")


@pytest.mark.parametrize("text", ["peer 10.0.0.0 and 0.0.0.0", "at 00:00:00.000 UTC", "crc 0x00000000",
                                  "retry 1 of 3, retry 2 of 3", "gnb-1, gnb-2, gnb-3 and gnb-4",
                                  '"| jvm 1 | <ts> <ts> | <ts> <ts>,077 [main]" ×1'])
def test_addresses_times_and_lists_are_not_loops(text):
    assert not loops(text)


def test_the_output_schema_names_every_reason():
    from typing import get_args

    from worker.messages.output import Summary
    from worker.pipeline.gate import CHECKS

    assert get_args(Summary.model_fields["reason"].annotation) == ("passed", "digest_mode", *CHECKS)


def test_the_verdict_records_every_check():
    v = judge("Theme:", DOC, None)
    assert v.checks == {"loop": True, "grounded": True, "copy": True, "content": False, "fact": True}


def test_the_finishing_stage_counts_summaries_by_source_and_reason():
    from worker.pipeline.finishing import Finishing
    from worker.pipeline.stage import Shared
    from worker.pipeline.deadletter import DeadLetters
    from worker.pipeline.tracker import OffsetTracker
    from worker.pipeline.inflight import DocRegistry
    from stage_fakes import Wake, make_doc

    tracker, metrics, wake = OffsetTracker(), Metrics(), Wake()
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=wake)
    fin = Finishing(config=dataclasses.replace(finishing_config(load_settings(environ={}), "m"), output_topic="out"),
                    shared=Shared(tracker, DocRegistry(), metrics, dl), combine=lambda d: None, wake=wake)
    for offset, text in enumerate(("[1] " * 40, GOOD, "Theme:")):
        doc = make_doc(tracker, offset=offset, text=DOC)
        fin._output(doc, text)
    sample = metrics.registry.get_sample_value
    assert sample("ribbon_summaries_published_total", {"source": "model", "reason": "passed"}) == 1
    assert sample("ribbon_summaries_published_total", {"source": "digest", "reason": "loop"}) == 1
    assert sample("ribbon_summaries_published_total", {"source": "digest", "reason": "content"}) == 1


def test_a_windows_output_goes_through_the_same_gate():
    """A window of one-line records (worker/windowing): a fragment of one of its lines is not published."""
    from types import SimpleNamespace

    lines = [f"<14>Oct 11 22:13:{i:02d} node-001 nginx[6319]: GET /api/v1/health 200 {400 + i}ms 10.14.199.{i}"
             for i in range(20)] + ["<11>Oct 11 22:13:30 node-001 nginx[6319]: upstream timed out to 10.14.199.7"]
    text = "\n".join(lines)
    window = SimpleNamespace(key="node-001", first_ts_ms=None, last_ts_ms=None, records=len(lines),
                             joiner=SimpleNamespace(event_count=len(lines)), reason="gap", tp=("lines", 0),
                             offsets=[0, 20], clock="poll", late=0, read_first_ms=None, read_last_ms=None)
    s = load_settings(environ={}, overrides={"model.path": "tiny-random"})
    doc = Doc(tp=("lines", 0), epoch=0, offset=20, key=b"node-001", doc_id="lines:0:0-20", text=text,
              meta={"source": "node-001"}, received=0.0, window=window,
              prepared=prepare(text, "node-001", None, PrepareOptions(3, False, 0.0, False)))
    # the fragment cites what no line holds: ungrounded
    fragment = "10.14.199.221: 22:13:20 node-001 nginx[6319]: GET /api/v1/health 200 461ms 10.14.199"
    msg = build_output(doc, fragment, config=finishing_config(s, "m"), now=1.0)
    assert msg.window.key == "node-001" and (msg.summary.source, msg.summary.reason) == ("digest", "grounded")
    # a line of the window copied, every value in it grounded: the copy check catches it
    copied = "22:13:05 node-001 nginx[6319]: GET /api/v1/health 200 405ms 10.14.199.5"
    msg = build_output(doc, copied, config=finishing_config(s, "m"), now=1.0)
    assert (msg.summary.source, msg.summary.reason) == ("digest", "copy")
    good = "node-001 nginx had its upstream timed out to 10.14.199.7 at 22:13:30 after health checks passed."
    msg = build_output(doc, good, config=finishing_config(s, "m"), now=1.0)
    assert (msg.summary.source, msg.summary.text) == ("model", good)


def test_a_copied_line_is_found_whatever_its_case_and_script():
    """Lines are read lower-cased, as is the whole document first (a line's words are the document's):
    a copied line with capitals of another script (a final sigma), or in the middle of a long document,
    is a copy; words spread over two lines are not."""
    from worker.pipeline.gate import copied_line
    filler = "\n".join(f"2026-03-01T21:{i // 60:02d}:{i % 60:02d}Z amf-2 INFO heartbeat {i}" for i in range(300))
    line = "ΣΦΑΛΜΑ ΣΥΝΔΕΣΗΣ: N2 setup failed towards gnb-017 after ΤΡΕΙΣ retries"
    assert copied_line("σφαλμα συνδεσης: N2 setup failed towards gnb-017 after τρεις retries",
                       f"{filler}\n{line}\n{filler}")
    assert not copied_line("N2 setup failed towards gnb-017 after retries",
                           f"{filler}\nN2 setup failed towards\ngnb-017 after retries\n{filler}")
