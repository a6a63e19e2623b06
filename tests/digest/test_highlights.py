"""Highlights: the fault of each sample kind is found, the result's contract holds for any input, edge cases."""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.demo.samples import document
from worker.digest.highlights import highlights

KINDS = ("trace", "syslog", "log", "crash", "pm")
SETTINGS = settings(max_examples=200, deadline=None)


def fault_line(doc: dict) -> str:
    """The one line of a sample document that a reader must see."""
    lines = doc["lines"]
    if doc["kind"] == "crash":
        (hit,) = [ln for ln in lines if " crash: " in ln]
    elif doc["kind"] == "pm":
        (hit,) = [ln for ln in lines if "rrc_conn_estab_succ=412;" in ln]
    else:
        (hit,) = [ln for ln in lines if " ERROR " in ln]
    return hit.strip()


def docs_of(kind: str, n_lines: int | None = None) -> list[dict]:
    """60 sample documents of one kind over three seeds (sizes 3 to 80 lines unless n_lines)."""
    i0 = KINDS.index(kind)
    return [document(i, n_lines=n_lines, seed=seed) for seed in range(3) for i in range(i0, 100, 5)]


# ---- table tests: realistic documents ------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_the_fault_of_every_sample_is_among_three_highlights(kind):
    missed = [d["id"] for d in docs_of(kind) if fault_line(d) not in highlights(d["lines"], 3)]
    assert missed == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_fault_is_found_in_a_long_document(kind):
    for d in [document(KINDS.index(kind) + 5 * j, n_lines=1500, seed=7) for j in range(3)]:
        assert fault_line(d) in highlights(d["lines"], 3)


def test_the_anomalous_pm_row_is_the_top_highlight():
    """The 412-successes row outranks every ordinary row: k=1 returns it alone."""
    for d in docs_of("pm", n_lines=30):
        assert highlights(d["lines"], 1) == [fault_line(d)]


def pm_rows(n: int, anomalies: dict[int, int]) -> list[str]:
    """n PM rows of one shape; succ is 950 + (cell % 7) except at the cells in anomalies."""
    return [f"gnb-017;cell={c};succ={anomalies.get(c, 950 + c % 7)};att=1000" for c in range(n)]


def test_two_outliers_of_one_shape_are_both_highlighted():
    """The shape dedupe drops ordinary repeats only: the second outlier row beats a warning of another shape."""
    rows = pm_rows(40, {11: 20, 29: 31}) + ["gnb-017 WARN clock drift"]
    assert highlights(rows, 2) == [rows[11], rows[29]]


def test_ordinary_repeats_give_way_to_other_shapes():
    rows = [f"INFO heartbeat seq={i}" for i in range(30)] + ["INFO cell 4 up", "INFO cell 9 up"]
    got = highlights(rows, 3)
    assert len([h for h in got if "heartbeat" in h]) == 1 and "INFO cell 4 up" in got


def test_a_far_outlier_row_outranks_a_warning():
    """A far outlier scores like a severity word (up to a "fatal"), above a WARN line."""
    rows = pm_rows(20, {5: 3}) + ["gnb-017 WARN clock drift 3 ms"]
    assert highlights(rows, 1) == [rows[5]]


def test_a_single_deviant_row_among_equal_rows_is_an_outlier():
    rows = ["amf-2 sessions active=1000 limit=5000"] * 9
    rows.insert(4, "amf-2 sessions active=0 limit=5000")
    assert highlights(rows, 1) == [rows[4]]


def test_numbers_of_a_small_group_are_not_compared():
    """Four rows of one shape (under the templater's min_group of 5): the odd value is not an outlier; a unique line wins."""
    rows = [f"link {c} rtt={v} ms" for c, v in zip("abcd", (10, 11, 10, 900))] + ["heartbeat from peer"]
    assert highlights(rows, 1) == ["heartbeat from peer"]


def test_hex_ids_are_not_magnitudes():
    """Ids of 8+ hex chars differ wildly in their leading digits; read as numbers, one would be an outlier."""
    rows = ["span 1000000a ok"] * 9 + ["span 9999999a ok", "plain note"]
    assert highlights(rows, 1) == ["plain note"]


def test_units_after_a_number_keep_its_value():
    rows = [f"probe {i} rtt={v}ms" for i, v in enumerate((12, 13, 12, 14, 13, 12, 4000, 13))]
    assert highlights(rows, 1) == [rows[6]]


def test_names_with_digits_are_not_magnitudes():
    """ "t300" is a name: another timer name is not an outlier among equal numbers."""
    rows = ["timer t300 set"] * 6 + ["timer t9999 set", "unique line"]
    assert highlights(rows, 1) == ["unique line"]


def test_a_severity_word_must_be_a_whole_word():
    lines = ["terror movie night", "errors=0 in report", "plain line one", "plain line two", "link down"]
    assert highlights(lines, 1) == ["link down"]


# ---- properties: any input -----------------------------------------------------------------

line_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "  ", "ERROR link down", "INFO ok seq=1", "INFO ok seq=2", "cell=3;succ=950",
                     "cell=4;succ=12", "0x7f3a1e10 frame", "\t", "retry 3.5 s"]),
)


def is_subsequence(sub: list[str], seq: list[str]) -> bool:
    it = iter(seq)
    return all(any(x == y for y in it) for x in sub)


@SETTINGS
@given(st.lists(line_text, max_size=60), st.integers(0, 12))
def test_result_is_an_ordered_subsequence_of_min_k_non_empty_lines(lines, k):
    kept = [ln.strip() for ln in lines if ln.strip()]
    got = highlights(lines, k)
    assert len(got) == min(k, len(kept))
    assert is_subsequence(got, kept)


@SETTINGS
@given(st.lists(line_text, max_size=60), st.integers(1, 12))
def test_result_is_deterministic(lines, k):
    assert highlights(list(lines), k) == highlights(list(lines), k)


@SETTINGS
@given(st.lists(line_text, max_size=60), st.integers(1, 6), st.data())
def test_blank_lines_change_nothing(lines, k, data):
    padded = list(lines)
    for _ in range(data.draw(st.integers(1, 5))):
        padded.insert(data.draw(st.integers(0, len(padded))), data.draw(st.sampled_from(["", " ", "\t\r"])))
    assert highlights(padded, k) == highlights(lines, k)


@SETTINGS
@given(st.lists(line_text, max_size=60))
def test_k_zero_gives_nothing(lines):
    assert highlights(lines, 0) == []


@SETTINGS
@given(st.lists(st.integers(900, 999), min_size=10, max_size=60), st.data())
def test_a_far_counter_is_always_the_top_highlight(succ, data):
    """PM rows with counters in 900-999 and one row at 0-99: that row is the first highlight."""
    bad = data.draw(st.integers(0, len(succ) - 1))
    succ[bad] = data.draw(st.integers(0, 99))
    rows = [f"smf-1;cell={c};succ={v};att=1000" for c, v in enumerate(succ)]
    assert highlights(rows, 1) == [rows[bad]]


# ---- edge cases ----------------------------------------------------------------------------

def test_empty_input():
    assert highlights([], 3) == []


def test_whitespace_only_lines_are_never_highlights():
    assert highlights(["", "  ", "\t", "\r"], 3) == []
    assert highlights(["", " a ", "\t", "b\r", "  "], 5) == ["a", "b"]


def test_one_line():
    assert highlights(["  only line  "], 3) == ["only line"]


def test_all_identical_lines_still_fill_k():
    assert highlights(["same line 1"] * 50, 3) == ["same line 1"] * 3


def test_all_rows_equal_numbers_have_no_outlier():
    """50 identical rows and a WARN: equal numbers are not outliers, the warning leads."""
    lines = ["cell=3;succ=950"] * 25 + ["cell=3 WARN succ dip"] + ["cell=3;succ=950"] * 25
    assert highlights(lines, 1) == ["cell=3 WARN succ dip"]


def test_lines_with_inner_newlines_and_odd_characters():
    lines = ["a\nb", "\ud800 broken surrogate 7", "naïve café 3", "ERROR ☃ 5"]
    assert highlights(lines, 1) == ["ERROR ☃ 5"]
    assert highlights(lines, 3) == [lines[0], lines[1], lines[3]]
