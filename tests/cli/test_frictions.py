"""What a new user trips on: help texts, progress totals, readable demo output, a word during the group
join, librdkafka's repeated lines, log values as JSON keys."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

import orjson
import pytest

from worker.cli.main import build_parser
from worker.demo.run import highlights_text
from worker.observability.joinwatch import JoinWatch
from worker.cli.produce import Split, count_documents, documents, produce_file
from worker.observability.logs import FIELDS, JsonFormatter, RepeatFilter, setup_logging

ROOT = Path(__file__).resolve().parents[2]


def _sub(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _help_of(parser: argparse.ArgumentParser, flag: str) -> str:
    return next(a.help for a in parser._actions if flag in a.option_strings)


@pytest.mark.parametrize("command", [("produce",), ("replay", "dlq"), ("replay", "rerun"), ("validate",)])
def test_commands_that_need_a_broker_do_not_promise_an_embedded_one(command):
    text = _help_of(_sub(build_parser(), *command), "--bootstrap-servers")
    assert "embedded" not in text and "required" in text


def test_run_still_says_it_starts_the_embedded_broker():
    assert "unset starts the embedded broker" in _help_of(_sub(build_parser(), "run"), "--bootstrap-servers")


@pytest.mark.parametrize("split,text", [
    ("jsonl", '{"text": "a"}\n\n{"text": "b"}\n  \n{"text": "c"}'),
    ("blank", "a1\na2\n\n\nb1\n\nc1\nc2\nc3\n"),
    ("blank", "\n\nx\n"),
    ("lines:2", "1\n2\n3\n4\n5"),
    ("lines:3", "1\n2\n3\n"),
    ("lines:1", ""),
])
def test_the_progress_total_is_the_documents_produced(tmp_path, split, text):
    path = tmp_path / "in.txt"
    path.write_text(text)
    assert count_documents(path, Split.parse(split)) == len(list(documents(path, Split.parse(split))))


def test_produce_shows_a_bar_with_its_total(broker, new_topic, tmp_path, capsys):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps({"text": f"doc {i}"}) for i in range(7)) + b"\n")
    from worker.kafka.config import plain_config

    n = produce_file(path, topic=new_topic("bar"), producer_conf=plain_config(broker.bootstrap).tool_producer(),
                     split=Split.parse("jsonl"), progress=True)
    assert n == 7 and re.search(r"\b7/7\b", capsys.readouterr().err)


def test_demo_highlights_read_as_lines_not_a_python_list():
    lines = ["2026-12-01T09:23:46Z smf-1 ERROR it's down", "java.lang.IllegalStateException: session 9"]
    text = highlights_text(lines)
    assert "['" not in text and "\\'" not in text and "[" not in text.splitlines()[0]
    assert [ln.strip() for ln in text.splitlines()[1:]] == [f"| {x}" for x in lines]
    assert "none" in highlights_text([])


def test_a_log_line_while_the_group_join_takes_its_time(caplog):
    now, ready = [0.0], [False]
    watch = JoinWatch("g1", ["in"], lambda: ready[0], every_s=10, clock=lambda: now[0])
    caplog.set_level(logging.INFO)

    def lines_at(t: float) -> list[str]:
        now[0] = t
        before = len(caplog.records)
        watch.tick()
        return [r.getMessage() for r in caplog.records[before:]]

    assert lines_at(0.0) == ["joining consumer group g1 for in: waiting for partitions"]
    assert lines_at(5.0) == []
    assert lines_at(10.0) == ["still waiting for consumer group g1 to assign partitions of in (10 s)"]
    assert lines_at(23.0) == ["still waiting for consumer group g1 to assign partitions of in (23 s)"]
    ready[0] = True
    assert lines_at(24.0) == []
    ready[0] = False  # all partitions revoked later: said once it lasts a while, not at once
    assert lines_at(30.0) == [] and lines_at(39.0) == []
    assert lines_at(40.0) == ["still waiting for consumer group g1 to assign partitions of in (10 s)"]


def _record(name: str, msg: str, *args, level=logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args or None, None)


def test_repeated_librdkafka_lines_are_printed_once():
    now = [0.0]
    f = RepeatFilter(window_s=30, clock=lambda: now[0])
    burst = [_record("librdkafka.producer", f"FAIL [thrd:127.0.0.1:{p}/1]: Connect to ipv4#127.0.0.1:{p} failed: "
                     f"Connection refused (after {i}ms in state CONNECT)") for i, p in enumerate(range(40000, 40027))]
    assert [f.filter(r) for r in burst] == [True] + [False] * 26
    assert f.filter(_record("librdkafka.producer", "another line")) is True  # a different line passes
    assert f.filter(_record("worker.pipeline.app", "same")) and f.filter(_record("worker.pipeline.app", "same"))
    now[0] = 31.0
    later = _record("librdkafka.producer", "FAIL [thrd:127.0.0.1:40000/1]: Connect to ipv4#127.0.0.1:40000 "
                    "failed: Connection refused (after 1ms in state CONNECT)")
    assert f.filter(later) and later.getMessage().endswith("(26 more like it held back)")


def _json(record: logging.LogRecord) -> dict:
    return orjson.loads(JsonFormatter().format(record))


def test_log_values_are_json_keys():
    out = _json(_record("worker.pipeline.ingest", "assigned %s", [("in", 0), ("in", 1)], level=logging.INFO))
    assert out["partitions"] == [["in", 0], ["in", 1]] and out["msg"] == "assigned [('in', 0), ('in', 1)]"
    out = _json(_record("worker.pipeline.app", "token budget %d (reserve %d per document), attention backend %s",
                        8192, 128, "sdpa"))
    assert (out["token_budget"], out["reserve"], out["attention_backend"]) == (8192, 128, "sdpa")
    out = _json(_record("worker.pipeline.delivery", "transaction aborted (%s); %d runs will be retried",
                        RuntimeError("fenced"), 3))
    assert out["error"] == "RuntimeError: fenced" and out["runs"] == 3
    out = _json(_record("x", "some other line %s and %d", "a", 2))  # not named: its values still travel
    assert out["args"] == ["a", 2]
    rec = _record("x", "held %s", "t")
    rec.held_s = 4.5  # extra= fields win and stay
    assert _json(rec)["held_s"] == 4.5


def test_every_named_log_message_exists_with_its_arguments():
    source = "\n".join(p.read_text() for p in (ROOT / "worker").rglob("*.py"))
    joined = re.sub(r'"\s*\n\s*"', "", source)  # implicit string concatenation across lines
    for msg, names in FIELDS.items():
        assert f'"{msg}"' in joined, f"no log call says {msg!r} (renamed? update FIELDS in worker/observability/logs.py)"
        assert len(re.findall(r"%[-+ 0#]*\d*(?:\.\d+)?[sdfr]", msg)) == len(names), msg


def test_json_lines_stream(capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("INFO", "json")
        logging.getLogger("worker.test").info("resumed %d partitions", 4)
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert orjson.loads(line)["resumed"] == 4
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_supervised_childs_lines_name_its_gpu(fmt, capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("INFO", fmt, gpu="1")
        logging.getLogger("ribbon.test").info("assigned %s", [("in", 3)])
        setup_logging("INFO", fmt, gpu="")  # outside the supervisor: no tag
        logging.getLogger("ribbon.test").info("assigned %s", [("in", 4)])
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    tagged, plain = capsys.readouterr().err.strip().splitlines()
    if fmt == "json":
        assert orjson.loads(tagged)["gpu"] == "1" and "gpu" not in orjson.loads(plain)
    else:
        assert "[gpu1] ribbon.test: assigned [('in', 3)]" in tagged and "[gpu" not in plain
