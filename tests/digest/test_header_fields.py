"""Header fields that are no part of a line's message (issue 37, item 2): bracketed `[key value]` fields,
error-id prefixes, a log4j logger written after the message, and the other pairs of a JSON or logfmt record."""

from __future__ import annotations

import orjson
import pytest

from worker.digest.document import analyze_document
from worker.digest.formats import read


def fields(line: str) -> tuple:
    r = read(line)
    return r.stamps[0], r.levels[0], r.messages[0]


@pytest.mark.parametrize("line,level,message", [
    ("[Tue Mar 03 11:22:33.123456 2026] [ssl:warn] [pid 4411:tid 8812] [client 192.0.2.44:51812] handshake failed",
     "WARN", "handshake failed"),
    ("[Tue Mar 03 11:22:33 2026] [notice] [client 192.0.2.44] directory index forbidden by rule: /srv/www/",
     "NOTICE", "directory index forbidden by rule: /srv/www/"),
    ("2026-03-03 11:22:33,001 ERROR [worker 7] [peer ::1:5400] replica fell behind", "ERROR", "replica fell behind"),
])
def test_bracketed_key_value_fields_after_the_level_are_header(line, level, message):
    assert fields(line)[1:] == (level, message)


def test_a_bracket_of_prose_or_of_pairs_stays_in_the_message():
    assert fields("2026-03-03 11:22:33,001 INFO [Flusher pool=main] flushed 3 segments")[2] == (
        "[Flusher pool=main] flushed 3 segments")
    assert fields("2026-03-03 11:22:33,001 INFO [see the manual] for details")[2] == "[see the manual] for details"


@pytest.mark.parametrize("line,message", [
    ("[Tue Mar 03 11:22:33.123456 2026] [core:error] [pid 4411] AH00558: could not reliably determine the name",
     "could not reliably determine the name"),
    ("2026-03-03 11:22:33,001 ERROR AMQ9209E: connection to host 'qm-2' closed", "connection to host 'qm-2' closed"),
    ("2026-03-03 11:22:33 ERROR ORA-01555: snapshot too old", "snapshot too old"),
])
def test_an_error_id_before_the_message_is_header(line, message):
    assert fields(line)[2] == message


@pytest.mark.parametrize("line,message,body", [
    ("[Tue Mar 03 11:22:33.1 2026] [core:error] [pid 4411] (13)Permission denied: [client 192.0.2.4:5100] AH00035: "
     "access to /index.html denied", "access to /index.html denied",
     "(13)Permission denied: [client 192.0.2.4:5100] AH00035: access to /index.html denied"),
    ("[Tue Mar 03 11:22:33.1 2026] [core:crit] [pid 4411] (24)Too many open files: AH00529: /srv/.htaccess unreadable",
     "/srv/.htaccess unreadable", "(24)Too many open files: AH00529: /srv/.htaccess unreadable"),
])
def test_an_os_error_before_the_fields_is_header_and_stays_in_the_templated_text(line, message, body):
    r = read(line)
    assert (r.messages[0], r.texts[0]) == (message, body)


def test_an_os_error_without_a_field_after_it_stays_in_the_message():
    line = "[Tue Mar 03 11:22:33.1 2026] [core:error] [pid 4411] (2)No such file or directory: cannot open /srv/x"
    assert fields(line)[2] == "(2)No such file or directory: cannot open /srv/x"


def test_words_with_digits_that_are_no_error_id_stay():
    assert fields("2026-03-03 11:22:33 INFO IPv6: link up")[2] == "IPv6: link up"
    assert fields("2026-03-03 11:22:33 INFO Http2 stream 5 reset")[2] == "Http2 stream 5 reset"


def test_a_log4j_logger_after_the_message_is_header():
    line = "[2026-03-03 11:22:33,001] WARN Retrying leader election for shard 3 (org.acme.cluster.Elector)"
    assert fields(line) == ("2026-03-03 11:22:33,001", "WARN", "Retrying leader election for shard 3")
    assert fields("2026-03-03 11:22:33 INFO done (took 3 ms)")[2] == "done (took 3 ms)"   # prose in parentheses


def test_json_and_logfmt_messages_are_the_message_value_and_the_other_pairs_fields():
    rows = [{"ts": "2026-03-03T11:22:33Z", "level": "warn", "msg": "slow query", "table": "orders", "ms": 930},
            {"ts": "2026-03-03T11:22:34Z", "level": "warn", "msg": "slow query", "table": "users", "ms": 1210}]
    r = read("\n".join(orjson.dumps(x).decode() for x in rows))
    assert r.form == "json" and r.messages == ["slow query", "slow query"]
    assert r.fields == ["table=orders ms=930", "table=users ms=1210"]
    lf = read('time=2026-03-03T11:22:33Z level=error msg="write failed" shard=3\n'
              'time=2026-03-03T11:22:34Z level=error msg="write failed" shard=4')
    assert lf.form == "logfmt" and lf.messages == ["write failed"] * 2 and lf.fields == ["shard=3", "shard=4"]
    assert read('{"level": "info", "table": "orders"}').messages == ["table=orders"]   # no message: the pairs


def test_the_templates_of_json_records_still_hold_their_fields():
    rows = [{"level": "warn", "msg": "slow query", "table": t, "ms": ms} for t, ms in
            (("orders", 930), ("users", 1210), ("orders", 45))]
    d = analyze_document("\n".join(orjson.dumps(x).decode() for x in rows)).digest
    assert [t["pattern"] for t in d["templates"]] == ["slow query table=<*> ms=<n>"]


@pytest.mark.parametrize("line,level", [
    ('2026-03-03T11:22:33+00:00 192.0.2.7 "GET /api/v1/items?page=2 HTTP/1.1" 503 0 "-" "curl/8.5"', "ERROR"),
    ("2026-03-03 11:22:33 192.0.2.7 - POST /login -1 404 512", "WARN"),
    ('2026-03-03T11:22:33Z 192.0.2.7 "PUT /x HTTP/2.0" 201 12', "INFO"),
])
def test_an_access_lines_status_gives_its_level_whatever_its_time_shape(line, level):
    assert read(line).levels == [level]


def test_a_number_after_a_quoted_word_is_no_status():
    assert read('2026-03-03 11:22:33 cache "orders" 500 entries evicted').levels == [None]


def test_templates_keep_the_header_fields_an_operator_searches_by():
    lines = [f"[Tue Mar 03 11:22:3{i} 2026] [core:error] [pid 44{i}] [client 192.0.2.{i}:5{i}00] AH00128: File does "
             f"not exist: /srv/www/f{i}.png (org.acme.web.Files)" for i in range(3)]
    r = read("\n".join(lines))
    assert r.messages[0] == "File does not exist: /srv/www/f0.png"
    assert r.texts[0] == "[client 192.0.2.0:5000] AH00128: File does not exist: /srv/www/f0.png (org.acme.web.Files)"
    d = analyze_document("\n".join(lines)).digest
    (pattern,) = [t["pattern"] for t in d["templates"]]
    assert pattern.startswith("[client <ip>] ") and pattern.endswith(": File does not exist: <*> (org.acme.web.Files)")
