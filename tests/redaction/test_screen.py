"""The document screen (worker/redaction/screen.py) in front of the RE2 union: the redactions are those of the
union alone, on ASCII text it clears, on text that is not ASCII, and with scans from several threads.

The secrets below are made up here; none is a live credential.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import regex_nodes
from worker.redaction import Policy, redactor
from worker.redaction.redact import Redactor
from worker.redaction.rules import FAMILIES

R = redactor(Policy())
U = Redactor(Policy())
U.rules = dataclasses.replace(R.rules, screen=None)  # the pass without the screen (a platform without hyperscan)
needs_screen = pytest.mark.skipif(R.rules.screen is None, reason="hyperscan is not installed on this platform")

# pieces of the families' conditions and of what surrounds them in logs, and runs of token characters
PIECES = ["password", "Passwd", "PASS", "token", "secret_key", "api-key", "Credentials", "authorization", "private key",
          "Bearer", "basic", "://", "user:", "@db", "AKIA", "ASIA", "eyJ", "ghp_", "glpat-", "xoxb-", "sk_live_", "SG.",
          "AIza", "ya29.", "AccountKey=", "_authToken", "aws", "cloudant", "IBM", "-us1", "PRIVATE KEY",
          "PuTTY-User-Key", "-----BEGIN RSA ", "-----END ", " ", "  ", "=", ":", ":=", "=>", "\n", "\t", '"', "'", "\\",
          ".", "-", "_", "/", "(", "[", "\v", "M", "AC", "SK"]
TOKEN = st.text(alphabet="abcdefABCDEF0123456789xyzQZ_-+/=.", min_size=1, max_size=40)
DOCUMENTS = st.lists(st.one_of(st.sampled_from(PIECES), TOKEN), max_size=60).map("".join)


@needs_screen
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_the_union_over_the_screens_spans_finds_what_it_finds_in_the_whole_text(doc):
    raw = doc.encode()
    spans = R.rules.screen.spans(raw)
    if spans is not None:
        inside = [m.span() for s, e in spans for m in R.rules.prefilter.finditer(raw, s, e)]
        assert inside == [m.span() for m in R.rules.prefilter.finditer(raw)]
    assert R.text(doc) == U.text(doc)


@needs_screen
@pytest.mark.parametrize("pattern", list(FAMILIES.values()))
def test_the_screen_holds_each_family(pattern):
    """Each family is in the database: a line the union hits through one family alone is not cleared."""
    examples = {FAMILIES["key_value"]: "x passwd = y", FAMILIES["auth_header"]: "hdr bearer abcdefgh1",
                FAMILIES["connection"]: "dsn pg://app:pw@db", FAMILIES["near_word"]: "token  0123456789abcdefXY",
                FAMILIES["provider"]: "id ASIA1234 x", FAMILIES["private_key"]: "PuTTY-User-Key-File-3: x"}
    line = examples[pattern]
    assert R.rules.prefilter.search(line.encode()) is not None
    assert R.rules.screen.spans(line.encode())
    doc = ("ordinary line\n" * 500 + line).encode()
    (s, e), = R.rules.screen.spans(doc)
    assert s >= 14 * 500 and [m.span() for m in R.rules.prefilter.finditer(doc)] == \
        [m.span() for m in R.rules.prefilter.finditer(doc, s, e)]
    assert R.rules.screen.spans(b"ordinary line 12:30:01 user=bob id=42\n" * 500) == []


@pytest.mark.parametrize("line, kept", [
    ("login to\u212aen=s3cr3tvalue99 ok", "to\u212aen=<redacted:token> ok"),      # RE2 folds the Kelvin sign into k
    ("retry pa\u017f\u017fword=hunter2 x", "pa\u017f\u017fword=<redacted:password> x"),  # and the long s into s
    ("aws " + "\u00e9" * 12 + ' key "' + "Ab1/" * 10 + '"', ' key "<redacted:aws_key>"'),  # `.{0,20}`: 14 characters, 26 bytes
])
def test_text_that_is_not_ascii_is_read_by_the_union(line, kept):
    """Hyperscan's byte mode folds no case beyond ASCII and counts `.` by bytes: it would clear these lines."""
    assert R.rules.prefilter.search(line.encode()) is not None
    out = R.text(line)
    assert out == U.text(line) and kept in out[0]


@needs_screen
def test_threads_scan_with_their_own_scratch():
    """Hyperscan's scratch space serves one scan at a time, and a scan releases the interpreter lock."""
    docs = [("user=bob id=%d ok\n" % i) * 20_000 + ("password=hunter%d\n" % i if i % 3 == 0 else "") for i in range(24)]
    want = [U.text(d) for d in docs]
    got: dict[int, tuple[str, dict[str, int]]] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(docs), 4):
                got[i] = R.text(docs[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [got[i] for i in range(len(docs))] == want


@needs_screen
def test_a_match_across_lines_is_one_span_and_takes_what_the_whole_text_gives_it():
    """`secret` ending a line and a token starting the next are one match of the union (its `\\s` holds the
    newline): the span starts on the first line, and the second line's own match is not found apart."""
    doc = "ok\nsecret\npassword=hunter2hunter2xx\nend\n"
    (s, e), = R.rules.screen.spans(doc.encode())
    assert doc[s:e].startswith("secret\npassword") and R.text(doc) == U.text(doc)


@needs_screen
def test_past_the_most_reports_the_union_reads_the_whole_document():
    from worker.redaction import screen

    doc = "".join(f"user{i} password=hunter{i}x\n" for i in range(screen._MOST + 5))
    assert R.rules.screen.spans(doc.encode()) is None
    assert R.text(doc) == U.text(doc) and R.text(doc)[1] == {"password": screen._MOST + 5}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_families_hold_no_assertion(name):
    """The union's matches inside a span are those of the whole text only while no family looks past its match
    (`^`, `$`, `\\b`): the spans would cut what an assertion reads."""
    found = {str(op) for op, _ in regex_nodes(FAMILIES[name])}
    assert "BRANCH" in found or "LITERAL" in found  # the walk reads the expression
    assert not found & {"AT", "ASSERT", "ASSERT_NOT", "GROUPREF"}
