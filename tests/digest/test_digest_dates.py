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


def test_a_document_mixing_time_forms_gets_keys_that_sort_as_its_times():
    # one scheme per document was chosen from its first stamp: an epoch first made a later syslog stamp
    # raise (float("Mar 16 ...")), which dead-lettered the document
    epoch_then_syslog = ["1117838570", "Mar 16 00:01:25", "1117838590"]
    keys = sort_keys(epoch_then_syslog)
    assert keys[0] < keys[2] and keys[1] == ""   # a time without a year cannot be placed among dated ones
    iso_then_epoch = ["2005-06-03T22:42:50Z", "1117838580", "2005-06-03 22:43:10"]
    keys = sort_keys(iso_then_epoch)
    assert keys[0] < keys[1] < keys[2]           # 22:42:50, 22:43:00, 22:43:10 (UTC), whatever their forms
    seconds_then_millis = ["1117838570", "1117838560000"]
    keys = sort_keys(seconds_then_millis)
    assert keys[1] < keys[0]                     # the milliseconds are ten seconds earlier
    keys = sort_keys(["1117838570", "1117838560.25"])   # 13 characters, seconds with a fraction
    assert keys[1] < keys[0]


def test_a_document_mixing_an_epoch_and_a_syslog_header_is_digested_with_its_dated_span():
    text = ("1117838570 node-7 kernel: INFO link up on eth0\n"
            "<13>Mar 16 00:01:25 gw sshd[77]: Accepted publickey for ops\n"
            "1117838590 node-7 kernel: ERROR link down on eth0")
    span = analyze_document(text).digest["span"]
    assert (span["first"], span["last"]) == ("2005-06-03T22:42:50Z", "2005-06-03T22:43:10Z")
