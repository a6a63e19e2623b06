"""Numeric dates written day or month first, a Go panic's frames after its blank line, and exception-class
continuation lines: the classes a review of the per-line header grammar found short."""

from __future__ import annotations

from worker.digest.clock import sort_keys, stamp_of
from worker.digest.document import analyze_document
from worker.multiline import continues


def test_day_first_dates_are_read_and_sort_as_times_not_as_text():
    assert stamp_of("19-06-2019 10:00:00").text == "2019-06-19T10:00:00"
    assert stamp_of("19.06.2019 10:00").text == "2019-06-19T10:00:00"
    keys = sort_keys(["19-06-2019 10:00:00", "20-05-2019 10:00:00"])
    assert keys[0] > keys[1]  # 19 June is after 20 May, although "19" sorts before "20"
    span = analyze_document("19-06-2019 10:00:00 ERROR a 1\n20-05-2019 10:00:00 INFO b 2\n"
                            "21-06-2019 10:00:00 INFO c 3").digest["span"]
    assert (span["first"], span["last"]) == ("2019-05-20T10:00:00", "2019-06-21T10:00:00")


def test_a_slash_date_is_month_first_unless_its_first_field_is_a_day():
    assert stamp_of("11/05/2018 19:21:00").text == "2018-11-05T19:21:00"
    assert stamp_of("13/05/2018 19:21:00.5").text == "2018-05-13T19:21:00.500"
    assert stamp_of("32-01-2019 10:00:00") is None


def test_a_common_log_format_stamp_keeps_its_form():
    assert stamp_of("01/Dec/2026:10:00:01 +0100").form == "apache"


def test_a_go_panics_frames_after_its_blank_line_take_its_level():
    a = analyze_document("2024-05-01T10:00:00Z ERROR panic: runtime error\n\ngoroutine 1 [running]:\nmain.main()\n"
                         "\t/app/main.go:12\n2024-05-01T10:00:01Z INFO ok")
    assert a.digest["severity"] == {"ERROR": 4, "INFO": 1}


def test_an_exception_class_line_continues_and_a_bare_error_word_does_not():
    assert continues("java.lang.IllegalStateException: x") and continues("ValueError: bad value")
    assert not continues("Error: disk full") and not continues("Exception")
