"""`ribbon tail` against the embedded broker: zstd-compressed, transactional summaries and dead letters."""

from __future__ import annotations

import uuid

import orjson
import pytest

from worker import __version__
from worker.cli.main import main
from worker.messages.models import BadMessage
from worker.kafka.headers import dead_letter_headers


def _summary(i: int, severity: dict, window: dict | None = None) -> bytes:
    summary = {"text": f"summary number {i}: disk full", "source": "digest", "reason": "fact"}
    return orjson.dumps({"id": f"in:0:{i}", "source": f"host-{i}", "summary": summary,
                         "highlights": [f"line {i} ERROR disk full"], "mode": "digest", "model": "digest",
                         "digest": {"lines": 3, "severity": severity}, "window": window})


@pytest.fixture
def outputs(broker, new_topic):
    """Three committed summaries (zstd, in a transaction) on 2 partitions, and one aborted."""
    from confluent_kafka import Producer

    topic = new_topic("out", 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd",
                  "transactional.id": f"tail-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, _summary(0, {"INFO": 3}), key=b"web-1", partition=0)
    p.produce(topic, _summary(1, {"ERROR": 1, "INFO": 2}), key=b"db-2", partition=1)
    p.produce(topic, _summary(2, {"WARN": 2, "INFO": 1},
                              {"start": "2024-05-01T12:00:00.000Z", "end": "2024-05-01T12:00:09.000Z",
                               "records": 3, "closed_by": "gap"}), key=b"web-1", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, _summary(3, {"FATAL": 1}), key=b"web-1", partition=0)
    p.abort_transaction(30)
    return topic


def _tail(broker, topic, capsys, *flags):
    assert main(["tail", "--bootstrap-servers", broker.bootstrap, "--output-topic", topic, *flags]) == 0
    return capsys.readouterr()


def test_one_block_per_committed_summary(broker, outputs, capsys):
    got = _tail(broker, outputs, capsys)
    blocks = [b for b in got.out.split("== ") if b.strip()]
    assert len(blocks) == 3 and "summary number 3" not in got.out
    assert "3 summaries from" in got.err
    window = next(b for b in blocks if "summary number 2" in b)
    assert window.startswith("web-1") and "2024-05-01T12:00:00.000Z .. 2024-05-01T12:00:09.000Z" in window
    assert "WARN 2, INFO 1" in window and "> line 2 ERROR disk full" in window
    assert "summary from the digest (fact)" in window and "{'text'" not in window


def test_filters_and_json(broker, outputs, capsys):
    assert "summary number 0" not in _tail(broker, outputs, capsys, "--min-severity", "warn").out
    got = _tail(broker, outputs, capsys, "--key", "web-1", "--json")
    rows = [orjson.loads(line) for line in got.out.splitlines()]
    assert sorted(r["id"] for r in rows) == ["in:0:0", "in:0:2"]
    got = _tail(broker, outputs, capsys, "--min-severity", "ERROR", "--json")
    assert [orjson.loads(line)["id"] for line in got.out.splitlines()] == ["in:0:1"]


@pytest.mark.parametrize(("last", "ids"), [(1, ["in:0:1", "in:0:2"]), (2, ["in:0:0", "in:0:1", "in:0:2"]),
                                          (50, ["in:0:0", "in:0:1", "in:0:2"])])
def test_last_counts_records_not_offsets(broker, outputs, capsys, last, ids):
    """Partition 0 ends in a commit marker, an aborted record and an abort marker: the last N of each
    partition are its last N committed records, whatever offsets the markers and aborted records take."""
    got = _tail(broker, outputs, capsys, "--last", str(last), "--json")
    assert sorted(orjson.loads(line)["id"] for line in got.out.splitlines()) == ids


def test_dead_letters(broker, new_topic, capsys):
    from confluent_kafka import Producer

    dlq = new_topic("dlq")
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    headers = dead_letter_headers(BadMessage("invalid_json", "starts with '{' but is not valid JSON"),
                                  topic="in", partition=0, offset=7, worker_version=__version__)
    p.produce(dlq, b'{"text": ', key=b"k7", headers=headers)
    p.produce(dlq, b"stray", key=b"k8", headers=[("error.class", b"x")])  # not written by Ribbon
    assert p.flush(10) == 0
    assert main(["tail", "--dlq", "--bootstrap-servers", broker.bootstrap, "--dlq-topic", dlq]) == 0
    out = capsys.readouterr().out
    assert "invalid_json: starts with '{' but is not valid JSON (from in/0@7)" in out and '{"text":' in out
    assert "not a Ribbon dead letter" in out.split("== k8")[1]


def test_a_missing_topic_and_bad_flags_are_one_line(broker, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tail", "--bootstrap-servers", broker.bootstrap, "--output-topic", "no-such-topic", "--timeout", "3"])
    assert exc.value.code == 2
    assert "kafka.output_topic" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["tail", "--bootstrap-servers", broker.bootstrap, "--last", "0"])
    assert exc.value.code == 2


def test_follow_waits_for_new_summaries(broker, new_topic):
    import io
    import threading

    from confluent_kafka import Producer

    from worker.cli.tail import TailOptions, tail
    from worker.kafka.config import plain_config

    topic = new_topic("out")
    out, done = io.StringIO(), threading.Event()
    t = threading.Thread(target=lambda: (tail(plain_config(broker.bootstrap), TailOptions(topic, follow=True, limit=1),
                                              out), done.set()), daemon=True)
    t.start()
    assert not done.wait(1.0), "with --follow, the end of the topic is no reason to stop"
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"})
    p.produce(topic, _summary(7, {"ERROR": 1}), key=b"late-host")
    assert p.flush(10) == 0
    assert done.wait(60) and "summary number 7" in out.getvalue()
