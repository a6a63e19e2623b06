"""The line-stream hook: lines and keys of records, dead letters, window documents; `ribbon produce --lines`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ingest_fakes import LineMsg

from worker.pipeline.configs import ingest_config
from worker.cli.produce import LineKey, lines
from worker.pipeline.tracker import OffsetTracker
from worker.config.settings import load_settings
from worker.pipeline.lines import LineStream, NoLine, window_info

TP = ("logs", 0)


Msg = LineMsg


def stream(**env):
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "logs,docs",
                               "RIBBON_WINDOWING__TOPICS": "logs", **{f"RIBBON_WINDOWING__{k.upper()}": v
                                                                      for k, v in env.items()}})
    tracker = OffsetTracker()
    dead: list = []
    ls = LineStream(ingest_config(s, None), tracker=tracker, dead_letter=lambda *a: dead.append(a), clock=lambda: 5.0)
    return ls, tracker, dead


def test_lines_and_keys_from_text_json_fields_regex_and_kafka_keys():
    ls, _, _ = stream(key_field="resource.service")
    assert "logs" in ls.topics and "docs" not in ls.topics
    assert ls.read(b"plain line\n", b"k1")[:3] == ("plain line", "k1", None)
    assert ls.read(b'{"message": "vector line", "resource": {"service": "api"}}', b"k1")[:3] == ("vector line", "api", None)
    assert ls.read(b'{"log": "fluent bit", "kind": "syslog"}', None)[:3] == ("fluent bit", "", "syslog")
    rx, _, _ = stream(key_regex=r"^\S+ +\d+ [\d:]+ (\S+)")
    assert rx.read(b"Oct 11 22:14:15 host7 sshd[1]: hi", b"ignored")[1] == "host7"
    assert rx.read(b"no match here", b"fallback")[1] == "fallback"


@pytest.mark.parametrize("value,error_class", [
    (None, "null_value"), (b"\xff\xfe", "invalid_utf8"), (b'{"text": ', "invalid_json"),
    (b'{"lines": ["a"]}', "missing_text"),
])
def test_records_without_a_line_are_dead_lettered(value, error_class):
    ls, tracker, dead = stream()
    with pytest.raises(NoLine) as err:
        ls.read(value, None)
    assert err.value.error_class == error_class
    epoch = tracker.assign(TP)
    tracker.see(TP, epoch, 3)
    assert ls.add_many([Msg(value, offset=3)], TP, epoch) == []
    assert [(d[2], d[5]) for d in dead] == [(3, error_class)]


def test_a_closed_window_is_one_document_whose_offsets_commit_together():
    ls, tracker, _ = stream(max_lines="2")
    epoch = tracker.assign(TP)
    docs = []
    for off, (key, line) in enumerate([(b"a", "a0"), (b"b", "b0"), (b"a", "a1"), (b"a", "a2")]):
        tracker.see(TP, epoch, off)
        docs += ls.add_many([Msg(line.encode(), key, off, ts=1_700_000_000_000 + off)], TP, epoch)
    (doc,) = docs
    assert (doc.doc_id, doc.key, doc.text, doc.offset) == ("logs:0:0-2", b"a", "a0\na1", 0)
    info = window_info(doc)
    assert info["offsets"] == [{"topic": "logs", "partition": 0, "first": 0, "last": 2}]
    assert (info["records"], info["events"], info["closed_by"]) == (2, 2, "max_lines")
    assert info["start"] == "2023-11-14T22:13:20.000Z" and info["end"] == "2023-11-14T22:13:20.002Z"
    tracker.complete(TP, epoch, doc.offset, ())
    assert tracker.take_ready() == []  # b's window (offset 1) is open inside a's range
    assert ls.drop([TP]) == 2


def test_produce_lines_keys(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b'{"host": "h1", "message": "x"}\nOct 11 22:14:15 h2 sshd: y\n\n{"host": {"n": 1}}\n')
    got = list(lines(path, LineKey(field="host", regex=r"^\S+ +\d+ [\d:]+ (\S+)", constant="c")))
    assert got == [(b"h1", b'{"host": "h1", "message": "x"}'), (b"h2", b"Oct 11 22:14:15 h2 sshd: y"),
                   (b'{"n":1}', b'{"host": {"n": 1}}')]
    assert [k for k, _ in lines(path, LineKey(constant="c"))] == [b"c"] * 3


def test_produce_lines_gives_continuation_lines_the_key_of_the_line_before(tmp_path):
    """A stack trace's lines carry no syslog header: keyed by the line before, they stay in its host's window."""
    path = tmp_path / "app.log"
    path.write_text("stray line before any header\n"
                    "Oct 11 22:14:15 h1 app: java.lang.IllegalStateException: boom\n"
                    "\tat com.example.Main.run(Main.java:12)\n"
                    "Caused by: java.io.IOException: disk\n"
                    "Oct 11 22:14:16 h2 app: fine\n"
                    "    wrapped tail of h2's message\n")
    keys = [k for k, _ in lines(path, LineKey(regex=r"^\S+ +\d+ [\d:]+ (\S+)", constant="c"))]
    assert keys == [b"c", b"h1", b"h1", b"h1", b"h2", b"h2"]
    assert [k for k, _ in lines(path, LineKey(regex=r"^\S+ +\d+ [\d:]+ (\S+)"))][:3] == [None, b"h1", b"h1"]


@pytest.mark.parametrize("args,message", [
    (["--key", "x"], "--key needs --lines"),
    (["--lines", "--key-regex", "("], "--key-regex is not a regular expression"),
    (["--lines", "--rate", "0"], "--rate must be > 0"),
])
def test_produce_lines_bad_flags_exit_2_with_one_line(tmp_path, args, message):
    path = tmp_path / "l.txt"
    path.write_text("a\n")
    res = subprocess.run([sys.executable, "-m", "worker", "produce", str(path), "--topic", "t",
                          "--bootstrap-servers", "127.0.0.1:1", *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_produce_lines_through_the_broker(broker, new_topic, tmp_path):
    from helpers import consume_all

    topic = new_topic("lines", partitions=2)
    path = tmp_path / "syslog.txt"
    path.write_text("".join(f"Oct 11 22:14:{i:02d} host{i % 3} app: line {i}\n" for i in range(30)))
    res = subprocess.run([sys.executable, "-m", "worker", "produce", str(path), "--topic", topic, "--lines",
                          "--key-regex", r"^\S+ +\d+ [\d:]+ (\S+)", "--bootstrap-servers", broker.bootstrap,
                          "--no-progress"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = consume_all(broker.bootstrap, topic, 30)
    assert sorted((m.key(), m.value()) for m in got) == sorted(
        (f"host{i % 3}".encode(), f"Oct 11 22:14:{i:02d} host{i % 3} app: line {i}".encode()) for i in range(30))


def test_run_windowed_flag_is_a_setting_with_a_one_line_error():
    res = subprocess.run([sys.executable, "-m", "worker", "run", "--windowed", "maybe"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2 and "windowing.enabled" in res.stderr and "RIBBON_WINDOWING__ENABLED" in res.stderr, \
        res.stderr


class Polled(Msg):
    def error(self):
        return None

    def topic(self):
        return "logs"

    def partition(self):
        return 0


def test_a_window_cap_closes_the_oldest_window_and_a_closed_window_counts_as_one_document(monkeypatch):
    import dataclasses

    from stage_fakes import Wake
    from ingest_fakes import PausingConsumer

    from worker.pipeline import lines

    from worker.observability.metrics import Metrics
    from worker.pipeline.commits import Commits
    from worker.pipeline.deadletter import DeadLetters
    from worker.pipeline.inflight import DocRegistry
    from worker.pipeline.ingest import Downstream, Ingest, Watermarks
    from worker.pipeline.stage import Shared

    tracker, metrics, finished = OffsetTracker(), Metrics(), []
    rules_of = lines.rules_of
    monkeypatch.setattr(lines, "rules_of", lambda w: dataclasses.replace(rules_of(w), max_windows=3))  # the cap
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "logs",
                               "RIBBON_MODEL__MODE": "digest"})
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=Wake())
    marks = Watermarks(high_tokens=100, low_tokens=50, high_messages=10, low_messages=5)
    ing = Ingest(config=ingest_config(s, marks), shared=Shared(tracker, DocRegistry(), metrics, dl),
                 make_consumer=PausingConsumer, commits=Commits(tracker),
                 downstream=Downstream(finished=lambda doc, text: finished.append(doc) or True))
    ing.consumer = ing.make_consumer()
    tracker.assign(TP)
    ing._ingest([Polled(f"flood {i}".encode(), b"flood", i) for i in range(50)])  # 50 in flight, one window
    ing._backpressure()
    assert ing.consumer.paused == [] and metrics.registry.get_sample_value("ribbon_open_windows") == 1
    ing._ingest([Polled(b"x", k, 50 + i) for i, k in enumerate((b"a", b"b"))])  # the third open window: a cap
    ing._take_prepared(block=True)
    ing._backpressure()  # the flood's window closed to make room: 50 records, one document on its way
    assert ing.consumer.paused == [] and metrics.registry.get_sample_value("ribbon_open_windows") == 2
    assert metrics.registry.get_sample_value("ribbon_windows_closed_total", {"reason": "max_held"}) == 1
    assert tracker.pending() == 52 and tracker.pending_documents() == 3  # 1 closed window + 2 open records
    ing._ingest([Polled(b"y", f"k{i}".encode(), 52 + i) for i in range(10)])  # each opens one, closing the oldest
    ing._take_prepared(block=True)
    ing._backpressure()  # 11 closed windows in flight: above high_messages (10) documents
    assert ing.consumer.paused == [["tp0", "tp1"]]
    for doc in finished + ing.lines.due(draining=True):  # the last windows close, and every output commits
        tracker.complete(doc.tp, doc.epoch, doc.offset, ())
    assert sum(len(r.offsets) for r in tracker.take_ready()) == 62 and tracker.pending_documents() == 0
    ing._backpressure()
    assert ing.consumer.resumed == [["tp0", "tp1"]]


class Topic(Polled):
    def __init__(self, value, key, offset, topic) -> None:
        super().__init__(value, key, offset)
        self._topic = topic

    def topic(self):
        return self._topic


def test_a_full_poll_of_line_records_is_topped_up_with_what_is_already_fetched():
    from ingest_fakes import PausingConsumer

    class Fetched(PausingConsumer):
        def __init__(self, topic: str, n: int) -> None:
            super().__init__()
            self.left = [Topic(f"l{i}".encode(), None, i, topic) for i in range(n)]

        def consume(self, num_messages, timeout):
            assert timeout == 0  # never waits: only what is already fetched
            out, self.left = self.left[:num_messages], self.left[num_messages:]
            return out

    from worker.pipeline.commits import Commits
    from worker.pipeline.ingest import Downstream, Ingest, Watermarks
    from worker.pipeline.source import LINE_POLLS
    from worker.pipeline.stage import Shared
    from worker.pipeline.deadletter import DeadLetters
    from worker.pipeline.inflight import DocRegistry
    from worker.observability.metrics import Metrics
    from stage_fakes import Wake

    tracker = OffsetTracker()
    s = load_settings(environ={"RIBBON_WINDOWING__ENABLED": "true", "RIBBON_KAFKA__INPUT_TOPICS": "logs,docs",
                               "RIBBON_WINDOWING__TOPICS": "logs", "RIBBON_PIPELINE__POLL_BATCH": "4",
                               "RIBBON_MODEL__MODE": "digest"})
    dl = DeadLetters(dlq_topic="dlq", tracker=tracker, count=lambda c: None, wake=Wake())
    ing = Ingest(config=ingest_config(s, Watermarks(100, 50, 10, 5)), shared=Shared(tracker, DocRegistry(), Metrics(), dl),
                 make_consumer=PausingConsumer, commits=Commits(tracker), downstream=Downstream(finished=lambda doc, text: True))
    ing.consumer = Fetched("logs", 1000)
    first = ing.consumer.consume(4, 0)
    assert len(ing.source.more_lines(ing.consumer, first)) == LINE_POLLS * 4  # lines: up to LINE_POLLS polls at once
    ing.consumer = Fetched("logs", 10)
    assert len(ing.source.more_lines(ing.consumer, ing.consumer.consume(4, 0))) == 10  # all there was
    ing.consumer = Fetched("docs", 1000)
    assert len(ing.source.more_lines(ing.consumer, ing.consumer.consume(4, 0))) == 4  # documents keep poll_batch
    ing.consumer = Fetched("logs", 3)
    assert len(ing.source.more_lines(ing.consumer, ing.consumer.consume(4, 0))) == 3  # a short poll: nothing more is fetched
    ing.consumer = Fetched("logs", 1000)
    polled = [*ing.consumer.consume(3, 0), _ConsumeError()]
    assert len(ing.source.more_lines(ing.consumer, polled)) == 4  # a consume error: the poll is not topped up


class _ConsumeError:
    """A consume error among a poll's records (a KafkaError does not compare with None)."""

    def error(self):
        from confluent_kafka import KafkaError
        return KafkaError(KafkaError._TRANSPORT)

    def topic(self) -> str:
        return "logs"


SHIPPED = [  # (record, line, key when the record has no Kafka key, its own time in ms)
    (b'{"message": "sshd[1]: Failed password", "host": "web-1", "timestamp": "2024-05-01T12:00:00Z"}',
     "sshd[1]: Failed password", "web-1", 1714564800000),
    (b'{"log": "E0501 sync failed\\n", "kubernetes": {"pod_name": "ctrl-0", "container_name": "manager"},'
     b' "@timestamp": 1714564801.5}', "E0501 sync failed", "ctrl-0/manager", 1714564801500),
    (b'{"MESSAGE": "Started Session 4", "_HOSTNAME": "db-2", "__REALTIME_TIMESTAMP": "1714564803000000"}',
     "Started Session 4", "db-2", 1714564803000),
    (b'{"MESSAGE": "Failed to start nginx", "_HOSTNAME": "db-2", "PRIORITY": "3", "__REALTIME_TIMESTAMP": "1714564803000000"}',
     "2024-05-01T12:00:03.000Z ERROR [db-2] Failed to start nginx", "db-2", 1714564803000),
    (b'{"body": {"stringValue": "db down"}, "timeUnixNano": "1714564804000000000",'
     b' "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "vm-9"}}]}}',
     "db down", "vm-9", 1714564804000),
    (b'{"body": "db down", "severityText": "Warning", "timeUnixNano": 1714564804000000000, "hostname": "vm-9"}',
     "2024-05-01T12:00:04.000Z WARNING [vm-9] db down", "vm-9", 1714564804000),
]


@pytest.mark.parametrize("value,line,key,time_ms", SHIPPED)
def test_shipper_records_give_line_host_key_and_time(value, line, key, time_ms):
    ls, tracker, _ = stream()
    got = ls.read(value, None)
    assert (got.line, got.key, got.time_ms) == (line, key, time_ms)
    assert ls.read(value, b"kafka-key").key == "kafka-key"
    epoch = tracker.assign(TP)
    tracker.see(TP, epoch, 0)
    ls.add_many([Msg(value, offset=0, ts=1)], TP, epoch)
    info = window_info(ls.due(True)[0])
    assert info["key"] == key and info["start"] == info["end"] != "1970-01-01T00:00:00.001Z"


@pytest.mark.parametrize("line,host", [
    ("<34>1 2024-05-01T12:00:00.003Z amf-2.core sshd 811 - - Failed password", "amf-2.core"),
    ("<13>Oct 11 22:14:15 host7 sshd[1]: hi", "host7"),
    ("Oct  1 02:14:15 gw-3 kernel: eth0 down", "gw-3"),
    ("2024-05-01T12:00:00+00:00 nas-1 smartd[5]: temp", "nas-1"),
    ("Oct 11 22:14:15 sshd[1]: no host field", ""),
    ("2024-05-01T12:00:00Z ERROR db down", ""),
    ("2024-05-01T12:00:00.123Z info main.go:12 started", ""),
    ("2024-05-01T12:00:00.123Z INF db down", ""),                     # any spelling of the level table
    ("2024-05-01T12:00:00.123Z WRN retrying", ""),
    ("    at com.example.Main.run(Main.java:12)", ""),
])
def test_an_unkeyed_syslog_line_is_keyed_by_its_own_host_line_by_line(line, host):
    ls, _, _ = stream()
    assert ls.read(line.encode(), None).key == host


def test_event_time_from_lines_and_shipper_fields_with_both_time_ranges_in_the_output():
    ls, tracker, _ = stream(time="event", grace_s="5")
    epoch = tracker.assign(TP)
    values = [b"2024-05-01T12:00:00Z web-1 app: started",            # its own timestamp
              b'{"message": "app: tick", "host": "web-1", "timestamp": "2024-05-01T12:00:02Z"}',
              b"May  1 12:00:03 web-1 app: ok",                       # RFC 3164: the year of the Kafka timestamp
              b"2024-05-01T11:59:40Z web-1 app: late by 23 s",
              b"2024-05-01T12:00:30Z web-1 app: after a 27 s silence"]
    docs = []
    for off, v in enumerate(values):
        tracker.see(TP, epoch, off)
        docs += ls.add_many([LineMsg(v, None, off, 1_714_600_000_000, [("tenant", b"acme")])], TP, epoch)
    (first,) = docs                              # the silence is a gap in event time
    info = window_info(first)
    assert (info["start"], info["end"], info["records"]) == ("2024-05-01T11:59:40.000Z", "2024-05-01T12:00:03.000Z", 4)
    assert (info["clock"], info["late"], info["closed_by"]) == ("event", 1, "gap")
    assert info["read_start"] is not None and info["read_end"] >= info["read_start"]
    assert first.headers == (("tenant", b"acme"),) and first.key == b"web-1"


def test_record_time_uses_the_kafka_timestamps():
    ls, tracker, _ = stream(time="record")
    epoch = tracker.assign(TP)
    docs = []
    for off, ts in enumerate([0, 1_000, 30_000]):
        tracker.see(TP, epoch, off)
        docs += ls.add_many([Msg(b'{"message": "m", "timestamp": "2030-01-01T00:00:00Z"}', b"k", off,
                                 ts=1_700_000_000_000 + ts)], TP, epoch)
    (first,) = docs
    assert window_info(first)["end"] == "2023-11-14T22:13:21.000Z" and window_info(first)["records"] == 2


def test_event_time_reads_a_lines_own_stamp_and_never_the_kafka_clock_for_a_line_without_one():
    """A stack frame has no stamp: it moves no clock (a Kafka timestamp months after a replayed log's times
    would push the watermark past every later line); a 3164 stamp just after New Year is last year's."""
    from datetime import datetime, timezone

    from worker.pipeline.lines import line_time_ms

    near = int(datetime(2026, 1, 1, 0, 0, 5, tzinfo=timezone.utc).timestamp() * 1e3)
    assert line_time_ms("Dec 31 23:59:58 host a: b", near) == int(
        datetime(2025, 12, 31, 23, 59, 58, tzinfo=timezone.utc).timestamp() * 1e3)
    assert line_time_ms("Jan  1 00:00:01 host a: b", near) == near - 4000
    assert line_time_ms("\tat a.b.C.d(C.java:1)", near) is None
