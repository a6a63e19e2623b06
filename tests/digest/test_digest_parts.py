"""Timestamps, levels, compaction, the digest prompt and the English rendering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.digest.compact import compact, compact_text, expand
from worker.digest.digest import build_digest
from worker.digest.levels import level_of_pattern
from worker.digest.prompt import document_text
from worker.digest.render import render
from worker.digest.templates import analyze
from worker.digest.timeparse import parse_line, span
from worker.demo.samples import QUALITY_KINDS, labelled


@pytest.mark.parametrize("line,text,form", [
    ("2026-12-01T10:00:01.123Z gnb-017 INFO x", "2026-12-01T10:00:01.123Z", "iso8601"),
    ("2026-12-01 10:00:01,250 INFO [main] x", "2026-12-01T10:00:01.250", "iso8601"),
    ("2026-12-01T11:00:01+01:00 x", "2026-12-01T10:00:01Z", "iso8601"),
    ("2026/12/01 10:00:01 x", "2026-12-01T10:00:01", "iso8601"),
    ("Dec  1 10:00:01 host sshd[12]: x", "--12-01T10:00:01", "rfc3164"),
    ("<13>Jun 14 15:16:01 combo sshd(pam_unix)[19939]: x", "--06-14T15:16:01", "rfc3164"),
    ('10.0.0.1 - - [01/Dec/2026:10:00:01 +0100] "GET / HTTP/1.1"', "2026-12-01T09:00:01Z", "apache"),
    ("1733040000 kernel: x", "2024-12-01T08:00:00Z", "epoch_s"),
    ("[1733040000.5] x", "2024-12-01T08:00:00.500Z", "epoch_s"),
    ("1733040000123 x", "2024-12-01T08:00:00.123Z", "epoch_ms"),
    ("081109 203615 148 INFO dfs.DataNode$PacketResponder: x", "2008-11-09T20:36:15", "compact"),
])
def test_timestamp_forms(line, text, form):
    s = parse_line(line)
    assert s is not None and (s.text, s.form) == (text, form)


@pytest.mark.parametrize("line", ["no time here", "2026-13-45T99:00:00 bad month", "12345 items", "seq=1733040000"])
def test_not_timestamps(line):
    assert parse_line(line) is None


def test_span_reads_both_ends():
    first, last = span(["header", "2026-12-01T10:00:00Z a", "x", "2026-12-01T10:05:00Z b", "footer"])
    assert (first.text, last.text, last.seconds - first.seconds) == ("2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z", 300)


@pytest.mark.parametrize("pattern,level", [
    ("<ts> <*> ERROR S1 link down", "ERROR"), ("<ts> <*> WARN [sbi] retrying", "WARN"),
    ("<ts> SEVERE: x", "CRITICAL"), ("[error] client denied", "ERROR"), ("<warn> disk", "WARN"),
    ("E/ActivityManager: crash", "ERROR"), ("ERROR:root:boom", "ERROR"), ("<ts> <*> INFO ok", "INFO"),
    ("<n> <n> <n> DEBUG dfs", "DEBUG"), ("a connection error happened", None), ("<ts> kernel: eth0 up", None),
])
def test_level_forms(pattern, level):
    assert level_of_pattern(pattern) == level


def test_level_counts_by_template_and_level_key():
    tm = analyze(["t=1 ERROR boom", "t=2 ERROR boom", "t=3 INFO fine"] + [f"level=warn k={i}" for i in range(3)])
    assert build_digest(tm).digest["severity"] == {"ERROR": 2, "WARN": 3, "INFO": 1}


DOC = st.lists(st.sampled_from([f"hb ok seq={i} ms={i % 7}" for i in range(30)]
                               + ["ERROR link down to 10.0.0.1", "user alice logged in", "user bob logged in",
                                  "cell 7 thp=3.1", "disk full", "  at frame_3 (x.c:12)"]), min_size=1, max_size=80)


@settings(max_examples=60, deadline=None)
@given(DOC)
def test_expanding_a_compaction_gives_every_template_with_its_count(lines):
    a = build_digest(analyze(lines))
    got = expand(compact_text(a))
    assert got == [(lines[t.first_line].rstrip(), t.count) for t in a.templates.templates]


@pytest.fixture(scope="module")
def count(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    return lambda texts: [len(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]]


@settings(max_examples=30, deadline=None)
@given(DOC)
def test_the_model_text_never_has_more_tokens_than_the_raw_document(count, lines):
    raw = "\n".join(lines)
    out = document_text(raw, build_digest(analyze(lines)), min_saving=0.0, count=count)
    assert count([out.text])[0] <= count([raw])[0]
    assert out.compacted or out.text == raw


@pytest.mark.parametrize("kind", QUALITY_KINDS)
def test_compaction_keeps_faults_verbatim_and_saves_on_long_logs(kind, count):
    s = labelled(kind, 0, 2000)
    raw = "\n".join(s.message["lines"])
    out = document_text(raw, build_digest(analyze(s.message["lines"])), min_saving=0.2, count=count)
    assert out.compacted and out.raw_tokens >= 3 * out.tokens
    assert all(f.strip() in out.text for f in s.faults)


def test_short_documents_are_left_raw():
    lines = ["2026-12-01T10:00:00Z a ERROR x", "2026-12-01T10:00:01Z b INFO y"]
    a = build_digest(analyze(lines))
    c = compact(a, "\n".join(lines), 0.2)
    assert not c.applied and c.text == "\n".join(lines)


def test_render_names_the_counts_failures_and_outliers():
    s = labelled("nf", 0, 1000)
    a = build_digest(analyze(s.message["lines"]))
    text = render(a.digest, s.message["source"], s.message["kind"])
    assert text.startswith(f"{a.digest['lines']:,} lines from {s.message['source'].split('/')[0]} (nf), ")
    assert "2 ERROR" in text and "Failures:" in text and "S1 link down" in text
    assert text == render(a.digest, s.message["source"], s.message["kind"])  # deterministic
    pm = labelled("pm_csv", 0, 500)
    d = build_digest(analyze(pm.message["lines"])).digest
    assert d["outliers"] and "Outlier: line" in render(d)
    assert d['outliers'][0]['text'] in pm.faults


def test_span_equals_the_first_timestamp_from_each_end_line_by_line():
    """span() scans joined lines with one regex: it finds what parse_line finds line by line."""
    from worker.digest.timeparse import SCAN_LINES
    from worker.demo.samples import mixed_corpus

    def reference(lines):
        first = next((s for s in map(parse_line, lines[:SCAN_LINES]) if s is not None), None)
        last = next((s for s in map(parse_line, reversed(lines[-SCAN_LINES:])) if s is not None), first)
        return (first, last) if first is not None else (None, None)

    docs = [d["lines"] for d in mixed_corpus(120, seed=3)] + [
        ["x", "Dec  1 10:00:00 host a", "y"], ["no", "time"], ["1733000000 a", "1733000000123 b", "261201 101010 c"],
        ["a 12:00:00 b" * 20, "2026-13-01T00:00:00 bad", "2026-12-01T00:00:00Z ok", "tail"], [], [""]]
    for lines in docs:
        assert span(lines) == reference(lines), lines[:3]
    assert sum(span(lines)[0] is not None for lines in docs) >= 60


def test_span_with_the_templaters_clock_flags_equals_span_over_every_line():
    from worker.digest.templates import analyze
    from worker.demo.samples import mixed_corpus

    docs = [d["lines"] for d in mixed_corpus(120, seed=4)] + [
        ["é" * 95 + " 10:00:00", "ü" * 98 + " 10:00:00", "x"], ["٢٠٢٦-١٢-٠١T10:00:00Z arabic digits", "ok"],
        ["[1733000000] a", "1733000000123", "261201 101010 c", "12:00:0 short"]]
    for lines in docs:
        tm = analyze(lines)
        assert span(lines, tm.line_clock) == span(lines), lines[:2]
