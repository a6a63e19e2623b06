"""The grounding check (worker/pipeline/grounding.py) and its place in the output message."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.pipeline.configs import finishing_config
from worker.pipeline.grounding import Support, _whole, check, identifiers

DOC = """2026-03-01T21:06:40Z gnb-017 oam ERROR S1 link down: SCTP association lost to 10.20.0.7:36412
2026-03-01T21:06:41Z gnb-017 oam WARN retry 3 of 5 path=/var/log/oam/s1.log id=3f2a9c1e-77aa-4b1c-9d2e-0a1b2c3d4e5f
2026-03-01T21:06:42Z gnb-017 oam ERROR cause=ERR_SCTP_TIMEOUT crc 0x7f3a2c1b "peer reset by mme-2"
"""
DIGEST = {"lines": 3, "severity": {"ERROR": 2, "WARN": 1}, "templates": [{"count": 1204, "example": "heartbeat"}],
          "outliers": [{"value": 812.4}]}


@pytest.mark.parametrize("text,expected", [
    ("Link to 10.20.0.7 lost", ["10.20.0.7"]),
    ("at 10.20.0.7:36412 now", ["10.20.0.7:36412"]),
    ("see /var/log/oam/s1.log", ["/var/log/oam/s1.log"]),
    ("node gnb-017 and eth0 and T300", ["gnb-017", "eth0", "T300"]),
    ("crc 0x7f3a2c1b and deadbeef12", ["0x7f3a2c1b", "deadbeef12"]),
    ("uuid 3f2a9c1e-77aa-4b1c-9d2e-0a1b2c3d4e5f", ["3f2a9c1e-77aa-4b1c-9d2e-0a1b2c3d4e5f"]),
    ("cause ERR_SCTP_TIMEOUT over SCTP", ["ERR_SCTP_TIMEOUT", "SCTP"]),
    ('said "peer reset by mme-2" twice', ["peer reset by mme-2"]),
    ("1,204 lines, 812.4 Mbps, 3 retries, 2026", ["1,204", "812.4", "3", "2026"]),
    ("failed at 05:00:00 and 09:34:55.102 then 7:15", ["05:00:00", "09:34:55.102", "7:15"]),
    ("sent SMContextStateChangeRequestTransfer and nfInstanceId", ["SMContextStateChangeRequestTransfer",
                                                                  "nfInstanceId"]),
    ("in dfs.DataNode via pdu_session_release", ["dfs.DataNode", "pdu_session_release"]),
    ("at db01.prod.example.com", ["db01.prod.example.com"]),
    ("The link went down at night in UTC.", []),
])
def test_identifiers_found(text, expected):
    assert identifiers(text) == expected


def test_support_matches_numbers_with_or_without_thousands_separators_and_digest_values():
    s = Support(DOC, DIGEST)
    assert s.has("1,204") and s.has("1204") and s.has("812.4") and s.has("36412")
    assert not s.has("1205") and not s.has("12.4") and not s.has("0412")
    assert s.has("GNB-017") and s.has("ERR_SCTP_TIMEOUT") and not s.has("gnb-018")


def test_sentences_with_invented_identifiers_are_dropped():
    summary = ("gNB gnb-017 lost its S1 link to 10.20.0.7 at 21:06. The likely cause is 10.20.0.9 failing. "
               "Impact: 1,204 heartbeats before the ERR_SCTP_TIMEOUT.")
    out = check(summary, DOC, DIGEST, "digest text")
    assert out.text == ("gNB gnb-017 lost its S1 link to 10.20.0.7 at 21:06. "
                        "Impact: 1,204 heartbeats before the ERR_SCTP_TIMEOUT.")
    g = out.grounding
    assert g.unsupported == ["10.20.0.9"] and g.dropped_sentences == 1 and not g.fallback and g.checked >= 6


def test_nothing_left_falls_back_to_the_digest_rendering():
    calls = []
    out = check("Host gnb-999 failed at 10.9.9.9.", DOC, DIGEST, lambda: calls.append(1) or "the digest")
    assert out.text == "the digest" and out.grounding.fallback and calls == [1]
    assert out.grounding.unsupported == ["gnb-999", "10.9.9.9"]


def test_mark_keeps_the_sentence_and_names_what_is_unverified():
    out = check("Host gnb-999 failed. It recovered.", DOC, DIGEST, "d", action="mark")
    assert out.text == "Host gnb-999 failed. [unverified: gnb-999] It recovered."
    assert out.grounding.dropped_sentences == 0 and out.grounding.unsupported == ["gnb-999"]


def test_off_only_reports():
    out = check("Host gnb-999 failed.", DOC, DIGEST, "d", action="off")
    assert out.text == "Host gnb-999 failed." and out.grounding.unsupported == ["gnb-999"]


def test_a_grounded_summary_is_published_unchanged():
    summary = "gnb-017 lost SCTP to 10.20.0.7 (cause ERR_SCTP_TIMEOUT) at 21:06:40."
    out = check(summary, DOC, DIGEST, "d")
    assert out.text == summary and out.grounding.unsupported == [] and out.grounding.checked == 5  # the time too


def test_the_output_message_carries_the_grounding_and_metrics_count_it():
    from worker.digest.prepared import PrepareOptions, prepare
    from worker.pipeline.inflight import Doc
    from worker.pipeline.finishing import count_grounding
    from worker.observability.metrics import Metrics
    from worker.pipeline.outputs import build_output
    from worker.config.settings import load_settings

    s = load_settings(environ={}, overrides={"model.path": "tiny-random"})
    doc = Doc(tp=("t", 0), epoch=0, offset=1, key=None, doc_id="t:0:1", text=DOC, meta={"source": "gnb-017/oam"},
              received=0.0, prepared=prepare(DOC, "gnb-017/oam", None, PrepareOptions(3, False, 0.0, False)))
    msg = build_output(doc, "Element gnb-042 failed.", config=finishing_config(s, "m"), now=1.0)
    assert msg.grounding.fallback and msg.grounding.unsupported == ["gnb-042"]
    assert msg.summary.text.startswith("3 lines from gnb-017")
    assert (msg.summary.source, msg.summary.reason) == ("digest", "grounded")
    m = Metrics()
    count_grounding(m, msg.grounding)
    assert m.registry.get_sample_value("ribbon_ungrounded_summaries_total") == 1
    assert m.registry.get_sample_value("ribbon_ungrounded_fallbacks_total") == 1


def test_a_quote_cut_short_is_checked_by_its_prefix():
    """The digest rendering cuts long patterns with "…": its quote is supported when its prefix is."""
    assert identifiers('Failures: "peer reset by mme…" ×3.') == ["peer reset by mme", "3"]
    assert check('Failures: "peer reset by mme…" ×3.', DOC, DIGEST, "d").grounding.unsupported == []


def test_numbers_match_as_written_too():
    """'55,349' in a CSV row is two fields, not fifty-five thousand: as written it occurs."""
    assert Support("2026-12-01T06:41:59Z,nrf-1,55,349,1000", None).has("55,349")


@given(needle=st.text(alphabet="0123.:", min_size=1, max_size=4),
       hay=st.text(alphabet="0123.:,a ٣", max_size=40))
@settings(max_examples=400, deadline=None)
def test_a_number_is_looked_up_whole_as_the_regular_expression_reads_it(needle, hay):
    """A number or time is supported where it occurs with no digit or dot before it and no digit after it,
    `\\d` a Unicode decimal digit ('٣' is one): the lookup by `str.find` answers as the expression would."""
    expected = re.search(rf"(?<![\d.]){re.escape(needle)}(?!\d)", hay) is not None
    assert _whole(needle, hay) == expected


def test_a_number_inside_a_longer_one_is_not_supported():
    s = Support("took 1234 ms, v1.5 at 10:05:07", None)
    assert s.has("1234") and s.has("10:05") and s.has("1.5")
    assert not s.has("123") and not s.has("234") and not s.has("5") and not s.has("05:07:1")
