"""`ribbon replay` (dead letters back, bounded re-run) and `ribbon validate`, against the embedded broker."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import orjson
import pytest
from helpers import ROOT, by_id, consume_all, mixed_docs, read_until_ids, topics, worker_env

from worker import __version__
from worker.cli.main import main
from worker.messages.models import BadMessage
from worker.kafka.headers import dead_letter_headers
from worker.cli.replay import parse_time
from worker.kafka.headers import REPLAY_SOURCE

T0 = 1_700_000_000_000  # epoch ms of the "old" records
T1 = T0 + 3_600_000


def _dead_letter(producer, dlq: str, src: str, offset: int, cls: str, ts: int, value: bytes) -> None:
    headers = dead_letter_headers(BadMessage(cls, f"bad {offset}"), topic=src, partition=0, offset=offset,
                                  worker_version=__version__)
    producer.produce(dlq, value=value, key=f"k{offset}".encode(), headers=[*headers, ("trace", b"t%d" % offset)],
                     timestamp=ts)


@pytest.fixture
def dlq(broker, new_topic):
    """A dead-letter topic: 3 invalid_json at T0, 2 schema at T1 (from `src`), 1 schema at T1 from `other`."""
    from confluent_kafka import Producer

    names = {"dlq": new_topic("dlq", 2), "src": new_topic("src"), "other": new_topic("other")}
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        _dead_letter(p, names["dlq"], names["src"], i, "invalid_json", T0 + i, b'{"text": "fixed %d"}' % i)
    for i in range(3, 5):
        _dead_letter(p, names["dlq"], names["src"], i, "schema", T1 + i, b'{"text": "fixed %d"}' % i)
    _dead_letter(p, names["dlq"], names["other"], 9, "schema", T1 + 9, b'{"text": "other"}')
    assert p.flush(10) == 0
    return names


def _replay(broker, dlq: str, *flags: str) -> int:
    return main(["replay", "dlq", "--bootstrap-servers", broker.bootstrap, "--dlq-topic", dlq, "--no-progress",
                 "--timeout", "30", *flags])


def test_dry_run_counts_and_produces_nothing(broker, dlq, capsys):
    assert _replay(broker, dlq["dlq"], "--dry-run", "--error-class", "schema") == 0
    out = capsys.readouterr().out
    assert "would replay 3 of 6 dead letters (by class: schema 3)" in out
    assert f"{dlq['src']}: 2" in out and f"{dlq['other']}: 1" in out
    assert consume_all(broker.bootstrap, dlq["src"], 1, timeout_s=2) == []


def test_replay_by_class_and_time_goes_back_to_the_source_topic(broker, dlq, capsys):
    since = str(T1)
    assert _replay(broker, dlq["dlq"], "--error-class", "schema", "--since", since) == 0
    # the scan starts at --since (Tansu's time index is per batch, so it may scan from earlier: the filter holds)
    assert "replayed 3 of " in capsys.readouterr().out
    back = consume_all(broker.bootstrap, dlq["src"], 2, timeout_s=10)
    assert sorted(m.value() for m in back) == [b'{"text": "fixed 3"}', b'{"text": "fixed 4"}']
    for m in back:
        headers = dict(m.headers())
        assert not {"error.class", "error.message", "source.topic", "worker.version"} & set(headers)
        assert headers["trace"] == b"t" + m.key()[1:]  # the record's own headers and key are kept
        assert headers[REPLAY_SOURCE].decode().startswith(dlq["dlq"] + ":")
    assert len(consume_all(broker.bootstrap, dlq["other"], 1, timeout_s=10)) == 1
    # until excludes the later ones; --to-topic overrides the source
    assert _replay(broker, dlq["dlq"], "--until", "2023-11-14T22:14:00Z", "--to-topic", dlq["other"]) == 0
    assert "replayed 3 of 6" in capsys.readouterr().out
    assert len(consume_all(broker.bootstrap, dlq["other"], 4, timeout_s=10)) == 4


def test_times_parse_as_iso_or_epoch_ms():
    assert parse_time("1700000000000") == T0
    assert parse_time("2023-11-14T22:13:20Z") == T0 == parse_time("2023-11-14T22:13:20")


def test_validate_reports_each_check(broker, new_topic, tiny_model, capsys):
    t = topics(new_topic)
    base = ["validate", "--bootstrap-servers", broker.bootstrap, "--model", tiny_model, "--device", "cpu",
            "--input-topic", t["input_topic"], "--output-topic", t["output_topic"], "--dlq-topic", t["dlq_topic"]]
    assert main(base) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split(":")[0] for line in out]
    assert names == ["ok   settings", "ok   identity", "ok   kafka clients", "ok   model", "ok   tokenizer",
                     "ok   attention", "ok   broker", "ok   input topic", "ok   output topic",
                     "ok   dead-letter topic", "ok   transactions"]
    assert "3 partition(s)" in out[7] and "reference on cpu" in out[5]
    missing = base[:-1] + [f"nope-{uuid.uuid4().hex[:6]}"]
    assert main(missing) == 1
    assert capsys.readouterr().out.splitlines()[-2].startswith("FAIL dead-letter topic")
    assert main([*base[:3], "--model", "/no/model", *base[5:]]) == 1
    out = capsys.readouterr().out
    assert "FAIL model" in out and "FAIL tokenizer: skipped" in out and "ok   broker" in out


def test_rerun_from_a_timestamp_in_its_own_group_leaves_the_live_group_alone(broker, new_topic, tiny_model, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    t = topics(new_topic, partitions=2)
    docs = mixed_docs(30, seed=21)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i, d in enumerate(docs):  # the first 20 are old, the last 10 new
        p.produce(t["input_topic"], value=orjson.dumps(d), key=b"k%d" % i, partition=i % 2,
                  timestamp=T0 if i < 20 else T1)
        if i == 19:
            assert p.flush(10) == 0  # the embedded broker's time index is per batch: old and new apart
    p.produce(t["input_topic"], value=b'{"text": "unterminated', partition=0, timestamp=T1)  # one dead letter
    assert p.flush(10) == 0
    live = f"live-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": live})
    c.commit(offsets=[TopicPartition(t["input_topic"], 0, 4), TopicPartition(t["input_topic"], 1, 7)],
             asynchronous=False)
    env = worker_env(broker.bootstrap, tiny_model, group=live, **t)
    rerun_group = f"rerun-{uuid.uuid4().hex[:6]}"
    t_start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "worker", "replay", "rerun", "--since", str(T1),
                          "--rerun-group", rerun_group], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "re-ran 11 offsets" in res.stdout and time.monotonic() - t_start < 240
    (dead,) = consume_all(broker.bootstrap, t["dlq_topic"] + ".rerun", 1, timeout_s=30)  # its own topic
    assert dict(dead.headers())["error.class"] == b"invalid_json"
    assert consume_all(broker.bootstrap, t["dlq_topic"], 1, timeout_s=3) == []  # the live one: untouched
    want = {d["id"] for d in docs[20:]}
    got = by_id(read_until_ids(broker.bootstrap, t["output_topic"], want, 30))
    assert set(got) == want and all(len(v) == 1 for v in got.values())
    tps = [TopicPartition(t["input_topic"], q) for q in range(2)]
    assert [tp.offset for tp in c.committed(tps, timeout=10)] == [4, 7]  # the live group: untouched
    r = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": rerun_group})
    assert [tp.offset for tp in r.committed(tps, timeout=10)] == [16, 15]
    c.close()
    r.close()


def test_rerun_refuses_the_live_group(broker, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["replay", "rerun", "--bootstrap-servers", broker.bootstrap, "--group-id", "live",
              "--rerun-group", "live", "--from-offset", "0"])
    assert exc.value.code == 2 and "is the live group" in capsys.readouterr().err


# ---- validate = run's checks -------------------------------------------------------------------

def _validate(broker, t: dict, *flags: str) -> int:
    return main(["validate", "--bootstrap-servers", broker.bootstrap, "--input-topic", t["input_topic"],
                 "--output-topic", t["output_topic"], "--dlq-topic", t["dlq_topic"], "--timeout", "10", *flags])


@pytest.mark.parametrize("setting", ['kafka.producer_extra={"compression.type": "brotli"}',
                                     'kafka.consumer_extra={"fetch.min.byte": 1000}'])
def test_validate_refuses_the_client_properties_run_refuses(broker, new_topic, setting, capsys, tmp_path):
    """`run` stops with exit 2 on these (librdkafka refuses them when the client is built); validate says FAIL."""
    t = topics(new_topic)
    assert _validate(broker, t, "--mode", "digest", "--set", setting) == 1
    out = capsys.readouterr().out
    name = setting.split("=")[0]
    assert f"FAIL kafka clients: setting {name}" in out and "librdkafka refused it" in out
    env = worker_env(broker.bootstrap, "/no/model", group="g", **t, RIBBON_MODEL__MODE="digest")
    env["RIBBON_" + name.upper().replace(".", "__")] = setting.partition("=")[2]
    res = subprocess.run([sys.executable, "-m", "worker", "run"], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2 and f"setting {name}" in res.stderr  # the same refusal from run


def test_validate_in_digest_mode_needs_no_model(broker, new_topic, capsys):
    t = topics(new_topic)
    assert _validate(broker, t, "--mode", "digest", "--model", "/no/model") == 0
    out = capsys.readouterr().out
    assert "ok   model: digest mode" in out and "ok   tokenizer" not in out and "ok   attention" not in out


def test_validate_probes_transactions_under_exactly_once(broker, new_topic, capsys):
    t = topics(new_topic)
    assert _validate(broker, t, "--mode", "digest") == 0
    assert "ok   transactions: init_transactions answered" in capsys.readouterr().out
    assert _validate(broker, t, "--mode", "digest", "--set", "kafka.delivery=at_least_once") == 0
    assert "transactions" not in capsys.readouterr().out
