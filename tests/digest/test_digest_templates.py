"""The templater through its facade: brute-force counts, merging, the corpus's true template counts."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker import _core
from worker.digest.templates import analyze
from worker.demo.samples import QUALITY_KINDS, labelled

WORDS = ("alpha", "beta", "gamma", "link", "session", "ok", "ue", "pfcp")
# (generated text, placeholder) of each variable class the masking must recognise
VARIABLES = {
    "n": st.integers(0, 10**9).map(str),
    "ms": st.integers(0, 9999).map(lambda x: f"{x}ms"),
    "hex": st.integers(0, 16**6).map(lambda x: f"0x{x:x}"),
    "ip": st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
}
PLACEHOLDER = {"n": "<n>", "ms": "<n>", "hex": "<hex>", "ip": "<ip>"}
TOKEN = st.one_of(st.sampled_from(WORDS).map(lambda w: (w, w)),
                  *[s.map(lambda v, k=k: (v, PLACEHOLDER[k])) for k, s in VARIABLES.items()])
LINE = st.lists(TOKEN, min_size=1, max_size=6)


def _fold_lists(line: list) -> list:
    """A run of four or more variables of one kind (a number with or without a unit is one kind) is one list."""
    kind = {"<n>": "n", "<hex>": "hex", "<ip>": "ip"}
    out, k = [], 0
    while k < len(line):
        e = k + 1
        while kind.get(line[k][1]) and e < len(line) and kind.get(line[e][1]) == kind[line[k][1]]:
            e += 1
        out.append(("list", "<*>") if e - k >= 4 else line[k])
        k = e if e - k >= 4 else k + 1
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=40))
def test_template_counts_equal_a_brute_force_count(lines):
    text = [" ".join(v for v, _ in line) for line in lines]
    lines = [_fold_lists(line) for line in lines]
    # one variable, one type: numbers and hex ids at one position are one class, shown <hex> when any is hex
    groups: dict[tuple, list] = {}
    for line in lines:
        groups.setdefault(tuple("<n>" if m == "<hex>" else m for _, m in line), []).append(line)
    expected = Counter({" ".join("<hex>" if any(ln[p][1] == "<hex>" for ln in members) else m
                                 for p, m in enumerate(key)): len(members) for key, members in groups.items()})
    tm = analyze(text, merge=False)
    assert Counter({t.pattern: t.count for t in tm.templates}) == expected
    assert [t.first_line for t in tm.templates] == sorted(t.first_line for t in tm.templates)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(LINE, st.just([])), min_size=1, max_size=40))
def test_every_line_has_one_template_and_the_counts_add_up(lines):
    text = [" ".join(v for v, _ in line) for line in lines]
    tm = analyze(text)
    ids = tm.line_template
    assert ((ids == -1) == np.array([not line for line in lines])).all()
    assert sum(t.count for t in tm.templates) == tm.nonblank == sum(1 for line in lines if line)
    for t in tm.templates:
        rows = np.flatnonzero(ids == t.index)
        assert (len(rows), rows.min(), rows.max()) == (t.count, t.first_line, t.last_line)


def test_one_position_merges_but_severity_words_never_do():
    users = ["alice", "bob", "carol", "dave"]
    tm = analyze([f"user {u} logged in" for u in users] + ["link up on port 3", "link down on port 3"])
    assert [(t.pattern, t.count) for t in tm.templates] == [
        ("user <*> logged in", 4), ("link up on port <n>", 1), ("link down on port <n>", 1)]
    assert tm.raw_templates == 6


def test_a_few_words_in_one_position_are_different_messages():
    """Up to three raw templates equal but for one constant word stay apart; a fourth value makes it a variable."""
    lines = ["queue north drained fully", "queue south drained fully", "queue north drained fully"]
    assert [t.pattern for t in analyze(lines).templates] == ["queue north drained fully", "queue south drained fully"]
    lines += ["queue east drained fully", "queue west drained fully"]
    assert [t.pattern for t in analyze(lines).templates] == ["queue <*> drained fully"]


def test_event_words_in_one_position_are_different_messages_however_many():
    """Participles and gerunds say what happened: Starting/Ending/Pausing/Resuming are four messages."""
    lines = [f"worker pool {w} main loop" for w in ("Starting", "Ending", "Pausing", "Resuming", "Starting")]
    assert [t.pattern for t in analyze(lines).templates] == [
        "worker pool Starting main loop", "worker pool Ending main loop", "worker pool Pausing main loop",
        "worker pool Resuming main loop"]


def test_words_that_are_values_elsewhere_merge_in_a_small_family():
    """A word a merged variable holds in one message is a value in another message too."""
    opened = [f"tunnel opened for peer {p} by (uid={i})" for i, p in enumerate(("kilo", "lima", "mike"))]
    assert len(analyze(opened).templates) == 3
    closed = [f"tunnel closed for peer {p}" for p in ("kilo", "lima", "mike", "oscar")]
    assert [t.pattern for t in analyze(opened + closed).templates] == [
        "tunnel opened for peer <*> by (uid=<n>)", "tunnel closed for peer <*>"]


def test_two_token_lines_merge_over_four_or_more_values():
    lines = [f"evicting {w}" for w in ("kilo", "lima", "mike")]
    assert len(analyze(lines).templates) == 3
    assert [t.pattern for t in analyze([*lines, "evicting oscar"]).templates] == ["evicting <*>"]
    outcomes = [f"link {w}" for w in ("closed", "reset", "refused", "timeout")]   # one event word among them
    assert len(analyze(outcomes).templates) == 4


def test_a_list_of_addresses_is_one_variable():
    tm = analyze(["peer 10.0.0.1 joined cluster", "peer 10.0.0.1,10.0.0.2 joined cluster",
                  "peer 10.0.0.3,10.0.0.4,10.0.0.5 joined cluster"])
    assert [(t.pattern, t.count) for t in tm.templates] == [("peer <ip> joined cluster", 3)]
    assert tm.templates[0].vars[0].distinct == 3


def test_a_quoted_phrase_is_cut_into_words_a_quoted_word_is_one_value():
    tm = analyze(['client "PUT /api/items HTTP/2" done', 'client "PUT /api/users HTTP/2" done',
                  'client "HEAD /api/items HTTP/2" done', 'cache "blob.v1" evicted', 'cache "blob.v2" evicted'])
    assert [(t.pattern, t.count) for t in tm.templates] == [
        ('client "PUT <*> <*>" done', 2), ('client "HEAD <*> <*>" done', 1), ("cache <q> evicted", 2)]


def test_value_summaries_and_numbers_come_from_the_same_pass():
    lines = [f"heartbeat ok seq={i} latency_ms={10 + i % 3}" for i in range(9)] + ["ERROR link down"]
    tm = analyze(lines)
    hb = tm.templates[0]
    seq, lat = hb.vars
    assert (seq.key, seq.min, seq.median, seq.max, seq.distinct) == ("seq", 0.0, 4.0, 8.0, 9)
    assert (lat.key, lat.distinct, lat.top[0]) == ("latency_ms", 3, ("10", 3))
    assert len(tm.num_values) == 18 and tm.num_lines.tolist()[:2] == [0, 0]
    assert tm.line_severity[-1] >= 4.0 and tm.line_severity[0] == 0.0


def test_quantities_in_more_or_fewer_words_are_one_variable():
    """A number and its unit word, a variable with a bracketed variable after it, a bound (<1) are one value."""
    tm = analyze(["copy done: 512 bytes (0.5 KB) written in 12 ms", "copy done: 20 bytes written in <1 ms",
                  "copy done: 2048 bytes (2.0 KB) written in 3 sec"])
    assert [(t.pattern, t.count) for t in tm.templates] == [("copy done: <n> written in <n>", 3)]
    assert [v.top[0][0] for v in tm.templates[0].vars] == ["20 bytes", "12 ms"]
    assert tm.templates[0].vars[0].min == 20.0 and tm.templates[0].vars[1].max == 12.0


def test_a_key_value_is_one_variable_whatever_its_brackets():
    tm = analyze(["lock held by ws=null, uid=1000", "lock held by ws=Pool{10113 app.one}, uid=1001",
                  "lock held by ws=Pool{7}, uid=1002", "area bounds=Rect(0, 0 - 1080, 1920) set"])
    assert [(t.pattern, t.count) for t in tm.templates] == [("lock held by ws=<*>, uid=<n>", 3),
                                                            ("area bounds=<*> set", 1)]
    assert tm.templates[1].vars[0].top[0][0] == "Rect(0, 0 - 1080, 1920)"


def test_a_path_or_url_is_one_variable_with_its_query():
    tm = analyze(["fetch /api/v1/items?id=7&sort=asc;x=1 ok", "fetch /static/app.js ok",
                  "fetch https://cdn.example.org/lib.js?v=3 ok", "mode=fast here"])
    assert [(t.pattern, t.count) for t in tm.templates] == [("fetch <*> ok", 3), ("mode=<*> here", 1)]


@pytest.mark.parametrize("token,kind", [
    ("35ms", "number"), ("98%", "number"), ("0x7f3a", "hex"), ("deadbeef01", "hex"), ("10.1.2.3:8080", "ip"),
    ("123e4567-e89b-12d3-a456-426614174000", "uuid"), ("2026-12-01T10:00:00Z", "time"), ("10:00:01", "time"),
    ('"a b"', "quoted"), ("gnb-017", "other"), ("S1", None), ("T300", None), ("eth0", None), ("down", None),
    ("/var/log/app", "other"), ("https://example.org/a", "other"), ("Jul", "time"), ("Sunday", "time"),
    ("July4", None), ("Mayday", None),
])
def test_token_kinds(token, kind):
    assert _core.classify_token(token) == kind


@pytest.mark.parametrize("kind", QUALITY_KINDS)
def test_corpus_true_template_counts_are_found(kind):
    for i, n in enumerate((300, 1500)):
        s = labelled(kind, i, n)
        assert len(s.faults) == 2
        assert all(f in s.message["lines"] for f in s.faults)
        assert len(analyze(s.message["lines"]).templates) == s.templates, (kind, n)


def test_corpus_is_deterministic():
    assert labelled("nf", 3, 500) == labelled("nf", 3, 500)
    assert labelled("nf", 3, 500) != labelled("nf", 4, 500)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.one_of(st.integers(0, 50), st.integers(0, 10**6))),
                min_size=1, max_size=60))
def test_scores_from_the_pass_equal_the_numpy_reference(rows):
    """num_z, line_z and template_severity (C++, one pass) equal the numpy reference and a max per template."""
    from outliers_reference import line_outlier_z

    words = ("heartbeat ok", "link down on", "session timeout after", "cell load")
    lines = [f"{words[w]} v={x}" for w, x in rows]
    tm = analyze(lines)
    line_z, z = line_outlier_z(len(lines), tm.num_lines, tm.num_vars, tm.num_values)
    np.testing.assert_allclose(tm.num_z, z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tm.line_z, line_z, rtol=1e-12, atol=1e-12)
    expected = [max(float(tm.line_severity[j]) for j in range(len(lines)) if tm.line_template[j] == t.index)
                for t in tm.templates]
    assert tm.template_severity.tolist() == expected


def test_the_core_makes_the_facade_tuples_field_for_field():
    """template_type/var_type: the core makes each template and variable an instance of the given NamedTuple,
    holding what it gives as plain tuples without them."""
    from worker.digest.templates import Template, VarSummary, templater
    text = "\n".join([f"user u{i % 4} logged in from 10.0.0.{i} port={1000 + i}" for i in range(30)] + ["plain line"])
    core = templater(True, 5)
    plain = core.analyze(text.encode())[9]
    typed = core.analyze(text.encode(), template_type=Template, var_type=VarSummary)[9]
    assert [type(t) for t in typed] == [Template] * len(plain) and plain
    assert all(type(v) is VarSummary for t in typed for v in t.vars) and any(t.vars for t in typed)
    assert typed == plain                                       # tuples compare item by item
    assert typed[0].vars[0].key == plain[0][6][0][0] and typed[0].pattern == plain[0][1]
    assert all(type(t) is tuple and all(type(v) is tuple for v in t[6]) for t in plain)


def test_the_core_refuses_a_type_that_is_no_tuple():
    core = _core.Templater(protected_words=[], severity=[])
    with pytest.raises(ValueError, match="template_type must be a subclass of tuple"):
        core.analyze(b"x", template_type=dict)
    with pytest.raises(ValueError, match="var_type must be a subclass of tuple"):
        core.analyze(b"x", var_type=1)
