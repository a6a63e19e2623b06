"""One owner of timestamps (worker/digest/timeparse.py): every shape the header grammar finds is one the
reader reads, and a line's timestamp reads the same whether the header grammar or parse_line found it."""

from __future__ import annotations

import re

import pytest

from worker.digest.formats import read
from worker.digest.timeparse import SHAPES, parse_line, stamp_of

# one text per shape of SHAPES, in its order (the last, a time of day alone, names no day: found, not read)
SAMPLES = ("2026-03-03T11:22:33.5+01:00", "2026/03/03 11:22:33,250", "2026-03-03-11.22.33.123456",
           "Tue Mar 03 11:22:33 2026", "Mar 03, 2026 11:22:33 AM", "Mar  3 11:22:33", "03-Mar-2026 11:22:33.250",
           "3 Mar 11:22:33.250", "03-Mar 11:22", "03.03.2026 11:22:33", "03/03 11:22:33.250", "260303 11:22:33",
           "20260303-11:22:33:25", "20260303 11:22:33.908", "Mar-03 11:22:33.250", "1772536953.5", "2026 Mar  3 11:22:33",
           "20260303:112233.250", "11:22:33.250")


def test_one_sample_per_shape():
    assert len(SAMPLES) == len(SHAPES)
    for shape, text in zip(SHAPES, SAMPLES):
        assert re.fullmatch(f"(?:{shape})", text), (shape, text)


@pytest.mark.parametrize("text", SAMPLES[:-1])
def test_every_shape_the_grammar_finds_is_read(text):
    assert read(f"{text} ERROR disk full").stamps[0] == text
    st = stamp_of(text)
    assert st is not None and re.search(r"-03T1[01]:22", st.text), st   # +01:00 read as 10:22Z


def test_a_twelve_hour_clock_after_a_numeric_date():
    line = "3/3/2026 11:22:33 PM 0B10 PACKET query"
    assert read(line).stamps[0] == "3/3/2026 11:22:33 PM"
    assert stamp_of("3/3/2026 11:22:33 PM").text == "2026-03-03T23:22:33"
    assert stamp_of("3/3/2026 12:22:33 AM").text == "2026-03-03T00:22:33"


@pytest.mark.parametrize("line", [
    "2026-03-03 11:22:33,250 -0800 ERROR [main] disk full", "2026-03-03 11:22:33 PDT [77] LOG:  checkpoint",
    "2026-03-03T11:22:33Z host app[1]: x", "Mar  3 11:22:33 host app[1]: x", "1772536953 kernel: x",
    '192.0.2.1 - - [03/Mar/2026:11:22:33 +0100] "GET / HTTP/1.1" 200 5', "260303 112233 77 INFO a.b: x",
])
def test_a_lines_timestamp_reads_the_same_found_either_way(line):
    assert parse_line(line) == stamp_of(read(line).stamps[0]) != None   # noqa: E711


def test_a_zone_name_other_than_utc_is_read_as_written_and_utc_converts():
    assert stamp_of("2026-03-03 11:22:33 PDT").text == "2026-03-03T11:22:33"
    assert stamp_of("2026-03-03 11:22:33 UTC").text == "2026-03-03T11:22:33Z"
    assert stamp_of("2026-03-03 11:22:33 -0800").text == "2026-03-03T19:22:33Z"


def test_no_step_tells_one_digit_from_another():
    """A text's step is kept per digit key (timeparse._STEP_OF): every step's pattern reads digits as a class."""
    from tests.digest.test_header_cache import _digit_reads
    from worker.digest.timeparse import _STEPS
    assert [rx.pattern for rx, _ in _STEPS if _digit_reads(rx.pattern)] == []


@pytest.mark.parametrize("text", [*SAMPLES[:-1], "2026-02-30 10:00:00", "13/13/2026 10:00:00", "2026-03-03T25:00:00Z",
                                  "03/04/2026 10:00:00", "28/04/2026 10:00:00", "2026-03-03T11:22:33.000500-05:30",
                                  "1772536953123", "12/Dec/2026:10:00:01 +0100", "not a time"])
def test_a_text_reads_the_same_after_a_text_of_its_digit_key(text):
    from worker.digest import timeparse
    others = [text.translate(str.maketrans("0123456789", m)) for m in ("0000000000", "9999999999", "1234567890")]
    for other in others:
        timeparse._STEP_OF.clear()
        alone = stamp_of.__wrapped__(text)
        timeparse._STEP_OF.clear()
        stamp_of.__wrapped__(other)                 # its key's step kept first
        assert stamp_of.__wrapped__(text) == alone, other


def test_fractions_and_zones_as_written():
    assert stamp_of("2026-03-03T11:22:33").text == "2026-03-03T11:22:33"
    assert stamp_of("2026-03-03T11:22:33.250").text == "2026-03-03T11:22:33.250"
    assert stamp_of("2026-03-03T11:22:33.000250").text == "2026-03-03T11:22:33.000250"
    assert stamp_of("2026-03-03T11:22:33.5+01:00").text == "2026-03-03T10:22:33.500Z"
    assert stamp_of("Mar  3 11:22:33.000001").text == "--03-03T11:22:33.000001"


@pytest.mark.parametrize("us", [0, 1, 500, 999, 1000, 10000, 100000, 123000, 123456, 999000, 999999])
def test_a_fraction_is_written_in_milliseconds_where_it_has_no_finer_digit_else_microseconds(us):
    whole = "" if not us else f".{us // 1000:03d}" if not us % 1000 else f".{us:06d}"
    assert stamp_of(f"2026-03-03 11:22:33.{us:06d}").text == f"2026-03-03T11:22:33{whole}"
    assert stamp_of(f"2026-03-03 11:22:33.{us:06d}+01:00").text == f"2026-03-03T10:22:33{whole}Z"
    assert stamp_of(f"Mar  3 11:22:33.{us:06d}").text == f"--03-03T11:22:33{whole}"
