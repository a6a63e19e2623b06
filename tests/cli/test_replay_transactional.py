"""`ribbon replay dlq` and `replay rerun` on topics written in transactions, as the worker writes them.

The last offset of a partition written in a transaction is the transaction's
commit marker, never delivered to a consumer: a replay that waited for a
record at `end - 1` never finished. Both commands stop at the end offsets
taken at start, reached by the consumer's position. Run on both brokers.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import orjson
import pytest
from helpers import ROOT, by_id, consume_all, mixed_docs, on_apache_kafka, on_both_brokers, read_until_ids, worker_env

from worker import __version__
from worker.cli.main import main
from worker.messages.models import BadMessage
from worker.kafka.headers import dead_letter_headers

pytestmark = pytest.mark.slow


def transactional_producer(bootstrap: str):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"test-{uuid.uuid4().hex[:8]}",
                  "enable.idempotence": True, "acks": "all"})
    p.init_transactions(30)
    return p


def write_dead_letters(bootstrap: str, dlq: str, src: str, n: int, per_txn: int = 2) -> None:
    """`n` dead letters of `src` in transactions of `per_txn` records, as the worker's delivery writes them."""
    p = transactional_producer(bootstrap)
    for start in range(0, n, per_txn):
        p.begin_transaction()
        for off in range(start, min(n, start + per_txn)):
            headers = dead_letter_headers(BadMessage("invalid_json", f"bad {off}"), topic=src, partition=0,
                                          offset=off, worker_version=__version__)
            p.produce(dlq, value=b'{"text": "fixed %d"}' % off, key=b"k%d" % off, headers=headers)
        p.commit_transaction(30)


@on_both_brokers
def test_replay_dlq_stops_at_the_end_of_a_transactional_topic(cluster, cluster_topic, capsys):
    dlq, src = cluster_topic("dlq", 2), cluster_topic("src")
    write_dead_letters(cluster.bootstrap, dlq, src, 5)
    flags = ["replay", "dlq", "--bootstrap-servers", cluster.bootstrap, "--dlq-topic", dlq, "--no-progress",
             "--timeout", "20"]
    t0 = time.monotonic()
    assert main([*flags, "--dry-run"]) == 0
    assert "would replay 5 of 5 dead letters (by class: invalid_json 5)" in capsys.readouterr().out
    assert main(flags) == 0
    assert time.monotonic() - t0 < 20, "the two replays waited for a timeout instead of ending at the end offsets"
    assert "replayed 5 of 5" in capsys.readouterr().out
    back = consume_all(cluster.bootstrap, src, 5, timeout_s=20)
    assert sorted(m.value() for m in back) == sorted(b'{"text": "fixed %d"}' % i for i in range(5))


@on_both_brokers
def test_replay_dlq_of_an_empty_transactional_partition_ends(cluster, cluster_topic, capsys):
    """A partition holding only aborted records and markers: nothing to replay, and no wait."""
    dlq, src = cluster_topic("dlq"), cluster_topic("src")
    p = transactional_producer(cluster.bootstrap)
    p.begin_transaction()
    p.produce(dlq, value=b"x", headers=[("error.class", b"schema"), ("source.topic", src.encode())])
    p.abort_transaction(30)
    assert main(["replay", "dlq", "--bootstrap-servers", cluster.bootstrap, "--dlq-topic", dlq, "--no-progress",
                 "--timeout", "20", "--dry-run"]) == 0
    out = capsys.readouterr().out
    if cluster.__class__.__name__ == "ApacheKafka":  # Tansu shows aborted records (see docs/operating.md)
        assert "would replay 0 of 0" in out


@on_apache_kafka  # the commit markers are the same on Tansu; one broker keeps the CI time down
def test_rerun_on_a_transactional_input_stops_at_its_end_and_honours_timeout(cluster, cluster_topic, tiny_model):
    """The input was written in transactions (e.g. by another exactly-once job): the re-run ends at the end
    offsets, and `--timeout` bounds it whatever happens."""
    t = {"input_topic": cluster_topic("in", 2), "output_topic": cluster_topic("out"),
         "dlq_topic": cluster_topic("dlq")}
    docs = mixed_docs(12, seed=31)
    p = transactional_producer(cluster.bootstrap)
    for start in range(0, len(docs), 4):
        p.begin_transaction()
        for i in range(start, start + 4):
            p.produce(t["input_topic"], value=orjson.dumps(docs[i]), key=b"k%d" % i, partition=i % 2)
        p.commit_transaction(30)
    env = worker_env(cluster.bootstrap, tiny_model, group=f"live-{uuid.uuid4().hex[:6]}", **t)
    cmd = [sys.executable, "-m", "worker", "replay", "rerun", "--from-offset", "0",
           "--rerun-group", f"rerun-{uuid.uuid4().hex[:6]}"]
    res = subprocess.run([*cmd, "--timeout", "90"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "re-ran 18 offsets" in res.stdout  # 12 records, 6 commit markers (3 transactions x 2 partitions)
    got = by_id(read_until_ids(cluster.bootstrap, t["output_topic"], {d["id"] for d in docs}, 30))
    assert set(got) == {d["id"] for d in docs}
    # a range that cannot finish (its group has work the worker cannot reach in time) stops at --timeout, exit 1
    res = subprocess.run([*cmd[:-1], f"rerun-{uuid.uuid4().hex[:6]}", "--timeout", "1"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "--timeout" in res.stderr
