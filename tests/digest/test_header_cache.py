"""The header parse cache of worker/digest/header_rows.py: one parse per key (a line with its digits written 0 and
its hex ids in one form per length and leading digits) serves every line of that key, so the key must never join
two lines whose headers differ."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import regex_nodes
from worker.digest import header, header_rows
from worker.digest.timeparse import MON
from worker.messages.levels import SPELLINGS
from worker.multiline import CONTINUATION

SHARED = Path(__file__).resolve().parents[3] / "shared"     # the development logs and formats (read, not copied)

_DIGITS = frozenset(range(ord("0"), ord("9") + 1))

# lines whose digits decide nothing but their values: klog's level letter glued to the date, a PRI, epochs of 10
# and 13 digits, an RFC 5424 version digit, pids, fractions of every length, a status code, a hex pointer
LINES = [
    "E0211 13:17:55.023299   42 server.go:60] listen failed",
    "<13>1 2026-03-02T10:00:00.117Z host-7 app 4411 ID47 - message 9",
    "<190>Mar  2 10:00:00 gw-01 kernel: [ 12.345678] eth0 link up",
    "1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO ok",
    "1700000000123 worker-3 WARN queue depth 42",
    "06/30 10:19:02.551: [smf] ERROR: session 17 lost",
    '192.0.2.7 - - [01/Dec/2026:10:00:01 +0100] "GET /api/v1/items/99 HTTP/1.1" 503 2326',
    "2026-03-02 10:00:00,117 9 --- [main-2] o.a.c.Svc : DEBUG3 retry 7",
    "2026-03-02T10:00:00.1Z pid=88 0x7f3a9c00e0 freed",
    "  at com.acme.Foo.bar(Foo.java:240)",
    "17:42:08.999 thread-12 [cache] evicted 1024 entries",
]


def _digits_changed(line: str) -> str:
    return line.translate(str.maketrans("0123456789", "7380915264"))


def _digit_reads(pattern: str) -> list:
    """The places where a pattern tells one ASCII digit from another: a digit literal, or a set that holds
    some digits but not all ten."""
    bad = []
    for op, av in regex_nodes(pattern):
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL") and av in _DIGITS:
            bad.append((name, chr(av)))
        elif name == "IN":
            held = set()
            for item_op, item in av:
                item_name = str(item_op)
                if item_name == "LITERAL" and item in _DIGITS:
                    held.add(item)
                elif item_name == "RANGE":
                    held |= _DIGITS & set(range(item[0], item[1] + 1))
                elif item_name == "CATEGORY" and "DIGIT" in str(item):
                    held |= _DIGITS
            if held and held != _DIGITS:
                bad.append(("IN", sorted(chr(c) for c in held)))
    return bad


@pytest.mark.parametrize("pattern", [header.HEADER, CONTINUATION, header.TRAILER, header.REQUEST,
                                     *header.STATUS.values()], ids=lambda p: p.pattern[:24])
def test_no_pattern_the_key_feeds_tells_one_digit_from_another(pattern):
    assert _digit_reads(pattern.pattern) == []


def test_the_digit_check_sees_a_digit_literal_and_a_partial_set():
    assert _digit_reads(r"E\d{4}|x1|[0-5]") == [("LITERAL", "1"), ("IN", list("012345"))]
    assert _digit_reads(r"DEBUG(?:0|1|2|3|4|5|6|7|8|9)|\d|[^\d]") == []


@pytest.mark.parametrize("line", LINES)
def test_a_line_parses_as_its_key_does(line):
    key = header_rows.shape_key(line)
    assert header_rows.recipe(line) == header_rows.recipe(key)
    assert header_rows.recipe(_digits_changed(line)) == header_rows.recipe(key)


def test_lines_of_one_key_read_their_own_fields_and_lines_of_two_headers_two_keys():
    header_rows._RECIPES.clear()
    doc = LINES + [_digits_changed(ln) for ln in LINES]
    cols = header_rows.columns("\n".join(doc), doc)
    for i, line in enumerate(doc):
        one = header_rows.columns(line, [line])
        assert (cols.stamps[i], cols.levels[i], cols.messages[i], cols.field(1)[i]) == (
            one.stamps[0], one.levels[0], one.messages[0], one.field(1)[0])
    assert len(header_rows._RECIPES) == len(LINES)       # one parse per key: a line and its digits changed
    # a key that wrote a hex id's letters as digits would join these two lines: their headers differ (an epoch, none)
    epoch, hexid = "1234567890 worker-3 WARN late", "12a4b6c8d0 worker-3 WARN late"
    assert header_rows.recipe(epoch)[0] != header_rows.recipe(hexid)[0]
    assert header_rows.shape_key(epoch) != header_rows.shape_key(hexid)


def _shared_lines() -> list[str]:
    lines = []
    for f in sorted((SHARED / "devlogs").glob("loghub/*/*_2k.log")):
        lines += f.read_text(encoding="utf-8", errors="replace").rstrip("\n").split("\n")
    formats = SHARED / "formats" / "formats.jsonl"
    if formats.exists():
        lines += [json.loads(r)["line"] for r in formats.read_text(encoding="utf-8").splitlines() if r.strip()]
    return lines


def test_every_development_and_format_line_parses_as_its_key_does():
    lines = _shared_lines()
    if not lines:
        pytest.skip(f"no development logs or formats under {SHARED}")
    folded, wrong = 0, []
    for line in lines:
        key = header_rows.shape_key(line)
        folded += key != line.translate(str.maketrans("123456789", "000000000"))
        if header_rows.recipe(line) != header_rows.recipe(key):
            wrong.append((line, key))
    assert (len(wrong), wrong[:3]) == (0, [])
    assert folded > 1000                            # the hex fold is exercised (request ids, hashes)


def test_no_word_the_grammar_spells_is_a_hex_id():
    """Level words in any case (SPELLINGS are read case-blind), upper-case levels and months as spelled: none is
    made of lower-case hex letters and digits alone, so none lies inside a hex id (whose letters the key rewrites)."""
    months = re.findall(r"[A-Z][a-z]+", MON)
    words = [*(w.lower() for w in SPELLINGS), *header.EXTRA_LEVELS, *months]
    assert len(months) == 12
    assert [w for w in words if re.fullmatch(r"[0-9a-f]+", w)] == []


def test_the_key_joins_request_ids_and_hashes():
    """Ids of one length and count of leading digits share a key (a leading digit is what a pid, a record id or
    `[123456789` reads)."""
    a = "2017-05-16 00:00:00.008 25746 INFO nova.api [req-3f101a0b-2096-447d-96ea-a692162415ae 11fd3a99c3da401f] ok"
    b = "2017-05-16 00:00:01.551 25746 INFO nova.api [req-9bc36dd9-91c5-4314-898a-47625eb93b09 54fadb412c4e40cd] ok"
    assert header_rows.shape_key(a) == header_rows.shape_key(b)
    assert header_rows.recipe(a) == header_rows.recipe(header_rows.shape_key(a))
    assert header_rows.shape_key(a.replace("3f10", "31f0")) != header_rows.shape_key(a)


# upper case, words glued to a run, short runs: a key that folded these would join (or break) headers
WIDE = [
    "E20250211 13:17:55.023299   42 server.go:60] listen failed",          # klog's level letter glued to the date
    "[Wed Oct 11 14:32:52 2000] [error] [client 192.0.2.1] ADE00558: bad",  # an upper-case error id
    "17-Feb-2018 23:06:56 node-1 WARN disk",                                 # months
    '192.0.2.7 - - [01/Dec/2026:10:00:01 +0100] "GET /a HTTP/1.1" 503 12',
    "2026-03-02 10:00:00 DEADBEEF1 WARN dead1 fault",
]


@pytest.mark.parametrize("line", WIDE)
def test_the_key_keeps_what_the_grammar_reads(line):
    key = header_rows.shape_key(line)
    assert len(key) == len(line)
    assert [c for c in key if c.isupper()] == [c for c in line if c.isupper()]
    assert header_rows.recipe(line) == header_rows.recipe(key)


def test_lines_that_differ_in_their_ids_share_one_parse_and_read_their_own_fields():
    header_rows._RECIPES.clear()
    doc = ["2017-05-16 00:00:00.008 25746 INFO nova.api [req-3f101a0b-2096-447d-96ea-a692162415ae 11fd3a99c3] ok",
           "2017-05-16 00:00:01.551 25746 INFO nova.api [req-9bc36dd9-91c5-4314-898a-47625eb93b09 54fadb412c] ok",
           "2017-05-16 00:00:02.001 25746 ERROR nova.api [req-9bc36dd9-91c5-4314-898a-47625eb93b09 54fadb412c] no"]
    cols = header_rows.columns("\n".join(doc), doc)
    assert len(header_rows._RECIPES) == 2                 # the two INFO lines: one parse
    assert cols.levels == ["INFO", "INFO", "ERROR"]
    for i, line in enumerate(doc):
        r = header_rows.recipe(line)
        assert cols.recipes[i] == r
        assert cols.messages[i] == line[r[7][0][0]:r[7][0][1]]


def test_the_keys_of_a_document_in_one_call_are_each_line_s_own():
    ids = ["deadbeef01", "0f0e0d0c-1a2b-3c4d-5e6f-a1b2c3d4e5f6", "a1b2c3d4-1a2b-3c4d-5e6f-a1b2c3d4e5f6x", "12345678"]
    lines = [*LINES, *ids, *(f"{a} {b}" for a in ids for b in ids), "", "-", "\t", *_shared_lines()]
    keys = header_rows._digits("\n".join(lines)).split("\n")      # as columns() cuts a document
    assert header_rows._shape_keys(keys) == [header_rows.shape_key(k) for k in keys]
    odd = ["a\ud800 deadbeef00", "deadbeef00"]                      # a lone surrogate: each line on its own
    assert header_rows._shape_keys(odd) == [header_rows.shape_key(k) for k in odd] == [odd[0], "aaaaaaaaa0"]
