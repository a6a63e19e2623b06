"""Header classes of formats absent from the development corpus (issue 37, item 2), one test per class; and the
figures of the labelled file of such formats (tests/digest/unseen_formats.jsonl, measured by bench/headers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import headers
from worker.digest.formats import read

UNSEEN = Path(__file__).with_name("unseen_formats.jsonl")


def fields(line: str) -> tuple:
    r = read(line)
    return r.stamps[0], (r.hosts or [""])[0], r.levels[0], r.messages[0]


@pytest.mark.parametrize("line,want", [
    # a bracketed one-letter level after bracketed tags (padded layer names)
    ("2024-02-01T08:00:00.000001 [PDCP    ] [W] Discarding PDU, sn=12 outside window",
     ("2024-02-01T08:00:00.000001", "", "WARN", "Discarding PDU, sn=12 outside window")),
    # a one-letter level opening a bracket that holds the time and a component
    ("[E 240201 08:00:00 handler:77] Uncaught exception GET /x", ("240201 08:00:00", "", "ERROR", "Uncaught exception GET /x")),
    ("[W 2024-02-01 08:00:00.500 LabApp] Config option deprecated",
     ("2024-02-01 08:00:00.500", "", "WARN", "Config option deprecated")),
])
def test_a_one_letter_level_in_brackets(line, want):
    assert fields(line) == want


@pytest.mark.parametrize("line,level,message", [
    ("W/Choreographer( 4321): Skipped 31 frames!", "WARN", "Skipped 31 frames!"),
    ("02-01 08:00:00.000 E/MediaCodec(  987): Codec reported err 0x1", "ERROR", "Codec reported err 0x1"),
])
def test_a_letter_slash_tag_and_pid_is_a_level_and_its_tag(line, level, message):
    _, _, lv, msg = fields(line)
    assert (lv, msg) == (level, message)


@pytest.mark.parametrize("line,level", [
    ("2024/02/01 08:00:00.10 UTC CRITICAL: CHASSIS #2001 fan tray removed", "CRITICAL"),
    ("2024/02/01 08:00:00.10 UTC MAJOR: CHASSIS #2002 power supply failed", "ERROR"),
    ("2024/02/01 08:00:00.10 UTC MINOR: LOGGER #2011 log file rollover", "WARN"),
])
def test_alarm_severities_are_levels(line, level):
    assert fields(line)[2] == level


@pytest.mark.parametrize("line,level", [
    ("dbug: App.Worker[0]", "DEBUG"), ("trce: App.Worker[0]", "TRACE"), ("fail: App.Worker[0]", "ERROR"),
    ("crit: App.Worker[0]", "CRITICAL")])
def test_dotnet_console_level_words(line, level):
    assert fields(line)[2] == level


def test_a_level_closing_a_bracketed_time():
    assert fields("[08:00:00 ERR] Payment declined") == ("08:00:00", "", "ERROR", "Payment declined")


def test_a_level_field_after_a_time_field_in_pipes():
    assert fields("2024-02-01 08:00:00.1234|WARN|Shop.Cart|basket expired")[2:] == ("WARN", "basket expired")


def test_a_dash_between_tags_and_the_level():
    line = "2024-02-01 08:00:00,000 [sid:7] - ERROR [main:Boot@12] - bind failed"
    assert fields(line)[2:] == ("ERROR", "bind failed")


@pytest.mark.parametrize("line,host,message", [
    ("[2024-02-01 08:00:00.000 +0000] WARN (77 on api-3): slow query", "api-3", "slow query"),
    ("[1706774400000] INFO (77): listening", "", "listening"),
])
def test_a_pid_and_host_in_parentheses_after_the_level(line, host, message):
    _, h, _, msg = fields(line)
    assert (h, msg) == (host, message)


def test_bracketed_fields_closed_by_a_colon_after_the_level():
    line = "[2024-02-01 08:00:00] ERROR[77][C-0000000a]: pbx.c:4000 run: Channel hung up"
    assert fields(line)[2:] == ("ERROR", "run: Channel hung up")


def test_a_level_glued_to_its_module():
    assert fields("Feb  1 08:00:00 [77] WARNING:tm:t_reply: no branch")[2:] == ("WARN", "t_reply: no branch")


@pytest.mark.parametrize("line,level,message", [
    ("Feb  1 08:00:00 pop3(bob)<77><Zx9a>: Warning: quota exceeded", "WARN", "quota exceeded"),
    ("2024/02/01 08:00:00 agentd[3]:collector: ERROR: timeout", "ERROR", "timeout"),
])
def test_a_context_glued_before_a_level_word(line, level, message):
    _, host, lv, msg = fields(line)
    assert (host, lv, msg) == ("", level, message)


@pytest.mark.parametrize("line", [
    "2024-02-01 08:00:00 resolver: info: query answered",
    "2024-02-01 08:00:00 10.0.0.9:4711 INFO session opened",
])
def test_a_category_or_a_peer_address_before_the_level_is_no_host(line):
    assert fields(line)[1] == ""


def test_an_empty_brace_tag_before_the_level():
    assert fields("2024.02.01 08:00:00.000001 [ 7 ] {} <Warning> Merger: slow merge")[2:] == ("WARN", "Merger: slow merge")


def test_a_numeric_column_between_time_and_level():
    line = "2024-02-01 08:00:00.000001 88.10% [WARNING] mod_x.c:10 Codec missing"
    assert fields(line)[2:] == ("WARN", "Codec missing")


@pytest.mark.parametrize("line,message", [
    ("2024-02-01 08:00:00.1+0000 [id=3]\tSEVERE\tjenkins.Foo#run: Build failed", "Build failed"),
    ("2024/02/01 08:00:00.000001 main.go:42: listening", "listening"),
])
def test_loggers_with_a_method_or_a_colon_after_the_line(line, message):
    assert fields(line)[3] == message


@pytest.mark.parametrize("line,message", [
    ("2024-02-01 08:00:00,000 ERROR [io.agroal.pool] (agroal-11) Datasource unreachable", "Datasource unreachable"),
    ("08:00:00,000 WARN  [org.x.Y] (MSC service thread 1-2) WFLYX0001: slow start", "slow start"),   # an error id: a field
])
def test_a_thread_in_parentheses_beside_a_bracketed_category(line, message):
    assert fields(line)[3] == message


@pytest.mark.parametrize("line,stamp,message", [
    ("[  101.000200] eth0: link up", "101.000200", "eth0: link up"),
    ("[7.500000] sd 0:0:0:0: [sda] Attached SCSI disk", "7.500000", "sd 0:0:0:0: [sda] Attached SCSI disk"),
])
def test_kernel_monotonic_time(line, stamp, message):
    assert fields(line) == (stamp, "", None, message)


def test_kernel_facility_and_level_before_its_time():
    assert fields("daemon:notice: [   9.000100] systemd[1]: Started x") == ("9.000100", "", "NOTICE", "Started x")


@pytest.mark.parametrize("line,stamp", [
    ("2/1/2024 8:00:00 PM 0B10 PACKET query", "2/1/2024 8:00:00 PM"),
    ("2024 Feb  1 08:00:00 leaf2 %BGP-5-ADJCHANGE: neighbor 10.0.0.1 Up", "2024 Feb  1 08:00:00"),
    ("1706774400: Client c1 closed its connection.", "1706774400"),
])
def test_timestamp_shapes(line, stamp):
    assert fields(line)[0] == stamp


@pytest.mark.parametrize("line,host,message", [
    ("2024-02-01 08:00:00.000001+0000  mac-1 launchd[1]: Service exited", "mac-1", "Service exited"),
    ("1 Feb 08:00:00 chronyd[77]: Selected source", "", "Selected source"),
    ("[1706774400] resolverd[77:1] warning: slow upstream", "", "warning: slow upstream"),
])
def test_a_program_and_pid_after_any_time(line, host, message):
    _, h, _, msg = fields(line)
    assert (h, msg) == (host, message)


@pytest.mark.parametrize("name,floor", [
    ("unseen_formats.jsonl", {"timestamp": (0.98, 0.95), "level": (0.98, 0.95), "host": (0.85, 0.85), "message": (0.9, 0.9)}),
    ("unseen_formats_check.jsonl", {"timestamp": (0.95, 0.9), "level": (0.98, 0.95), "host": (0.95, 0.95),
                                    "message": (0.9, 0.9)}),
])
def test_the_unseen_formats_files_figures(name, floor):
    """The labelled lines of formats outside the development corpus (bench/headers.py): per field, the micro
    precision and recall at or above the floors (what bench/results/quality_cpu.json reports under
    header_detection_unseen, rounded down); a normalized level is never wrong."""
    total = headers.measure(UNSEEN.with_name(name))["total"]
    for field, (precision, recall) in floor.items():
        assert total[field]["precision_micro"] >= precision and total[field]["recall_micro"] >= recall, field
    assert total["level_normalized"]["precision_micro"] == 1.0


def test_a_host_after_a_year_first_syslog_time():
    line = "2024 Feb  1 08:00:00 spine-2 %OSPF-4-NBR_DOWN: neighbor 10.0.0.2 down"
    assert fields(line)[:2] == ("2024 Feb  1 08:00:00", "spine-2")


def test_a_pid_glued_before_a_compact_time():
    line = " 77:20240201:080000.250 item [web-1:agent.ping] became not supported"
    assert fields(line) == ("20240201:080000.250", "", None, "item [web-1:agent.ping] became not supported")


def test_an_indented_line_with_a_time_of_its_own_starts_a_record():
    """Its level is its own (none here), never the line's before it."""
    text = ("    2024-02-01T08:00:00.000Z [ERROR] agent: rpc failed\n"
            "    2024-02-01T08:00:01.000Z heartbeat sent\n"
            "        at retry loop")
    r = read(text)
    assert r.continued == [False, False, True]
    assert r.levels[:2] == ["ERROR", None]


def test_a_json_time_in_extended_json_and_a_caller_that_is_no_host():
    r = read('{"t":{"$date":"2024-02-01T08:00:00.000+00:00"},"s":"E","c":"STORAGE","msg":"disk full"}\n'
             '{"level":"warn","ts":"2024-02-01T08:00:01Z","caller":"raft/node.go:12","msg":"slow fsync"}')
    assert r.stamps == ["2024-02-01T08:00:00.000+00:00", "2024-02-01T08:00:01Z"]
    assert not r.hosts or r.hosts[1] == ""


def test_a_bracketed_time_closed_by_a_level_and_a_worker():
    assert fields("[2024-02-01 08:00:00,250: WARNING/Worker-3] Retry in 5s") == (
        "2024-02-01 08:00:00,250", "", "WARN", "Retry in 5s")


@pytest.mark.parametrize("line,level,message", [
    ("[2024-02-01 08:00:00 +0000] critical/IdoPgsql: Query failed", "CRITICAL", "Query failed"),
    ("2024-02-01 08:00:00,250 - helpers.py[ERROR]: Command failed", "ERROR", "Command failed"),
])
def test_a_level_glued_to_a_component(line, level, message):
    assert fields(line)[2:] == (level, message)


def test_a_pid_in_parentheses_then_a_spaced_colon_after_the_level():
    assert fields("[ALERT]    (77) : backend be1 has no server available!")[2:] == (
        "CRITICAL", "backend be1 has no server available!")


def test_a_rust_module_path_logger_before_a_dash():
    assert fields("2024-02-01T08:00:00.1+00:00 WARN api::handlers::auth - token expired")[3] == "token expired"


def test_an_upper_case_level_word_opening_a_syslog_message():
    line = "Feb  1 08:00:00 stor-1 object-server: ERROR container update failed"
    assert fields(line)[1:3] == ("stor-1", "ERROR")


def test_a_name_before_a_parenthesized_level_is_no_host():
    assert fields("2024-02-01 08:00:00 +0000 Agent (warning): Skipping run")[1:3] == ("", "WARN")


@pytest.mark.parametrize("line,stamp", [
    ("8:00AM WRN disk almost full", "8:00AM"),
    ("[2/1/24 8:00:00:250 UTC] 0000004a ThreadMonitor W   WSVR0605W: Thread hung", "2/1/24 8:00:00:250 UTC"),
])
def test_more_timestamp_shapes(line, stamp):
    assert fields(line)[0] == stamp


def test_key_value_metadata_before_a_bracketed_level():
    assert fields("08:00:00.250 request_id=Fx7 user=42 [warning] slow render")[2:] == ("WARN", "slow render")


def test_a_hash_run_before_an_angle_bracketed_time():
    line = "####<Feb 1, 2024 8:00:00,250 PM UTC> <Warning> <JDBC> <node-1> <Server-1> <> <BEA-001129> <Pool shrunk>"
    assert fields(line)[0::2] == ("Feb 1, 2024 8:00:00,250 PM UTC", "WARN")


def test_a_date_and_time_joined_by_a_dash():
    assert fields("02/01/2024-08:00:00.000250  [**] [1:2:3] ET SCAN probe [**]")[0] == "02/01/2024-08:00:00.000250"
