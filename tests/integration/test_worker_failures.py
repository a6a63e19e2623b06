"""The worker under failure: kill -9 at random moments, and a consumer group that changes shape.

Each runs on both brokers. On Apache Kafka a read_committed reader never sees
an aborted record, so the check is strict: every input summarized exactly once,
no repeat at all. On Tansu aborted transactional records are visible even to
read_committed consumers, so a crash can surface repeats there: on Tansu alone
we check that nothing is lost and that any repeat is identical to the first
copy (but for timing_ms).
"""

from __future__ import annotations

import random
import signal
import time
import uuid

import orjson
from helpers import (by_id, committed_equals_end, consume_all, mixed_docs, produce, read_until_ids, same_but_timing,
                     fork_worker, is_apache, on_both_brokers, start_worker, topics, wait_for, worker_env,
                     worker_forker)

from worker.demo.samples import document
from group_helpers import FAST_GROUP, committed_offsets, wait_for_assignment


def assert_complete_and_consistent(outs: dict[str, list[dict]], ids: set[str], strict: bool = False) -> None:
    """Every id summarized; `strict` (Apache Kafka): exactly once, else (Tansu) repeats must be identical."""
    missing = ids - set(outs)
    assert not missing, f"{len(missing)} inputs without a summary, e.g. {sorted(missing)[:5]}"
    assert set(outs) == ids, f"summaries of unknown ids: {sorted(set(outs) - ids)[:5]}"
    if strict:
        repeated = {k: len(v) for k, v in outs.items() if len(v) > 1}
        assert not repeated, f"{len(repeated)} ids repeated under read_committed, e.g. {list(repeated.items())[:5]}"
    for doc_id, copies in outs.items():
        assert all(same_but_timing(copies[0], c) for c in copies[1:]), f"{doc_id} repeated with other content"


def everything_committed(cluster, topic: str, n: int) -> dict[str, list[dict]]:
    """The whole topic under read_committed, once the workers stopped (one more than `n` shows a late repeat)."""
    return by_id(consume_all(cluster.bootstrap, topic, n + 1, timeout_s=5, isolation="read_committed"))


KILLS = {"apache": 20, "tansu": 6}  # strict on Apache Kafka; on Tansu (repeats tolerated) fewer, for CI time


@on_both_brokers
def test_kill_9_after_assignment_twenty_times_loses_nothing(cluster, cluster_topic, tiny_model, tmp_path,
                                                            monkeypatch):
    """Each cycle: start a worker, wait until it logs its assignment, kill -9 it at a random moment while it
    processes. Workers fork from a preloaded server (helpers.worker_forker) so 20 cycles fit in CI."""
    kills = KILLS["apache" if is_apache(cluster) else "tansu"]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # read when the server imports torch
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    ctx = worker_forker()
    rng = random.Random(7)
    t = topics(cluster_topic)
    docs: list[dict] = []

    def top_up(n: int) -> None:  # every kill must find work left, whatever the machine's speed
        more = [document(i, n_lines=1 + i % 2, seed=4) for i in range(len(docs), len(docs) + n)]
        produce(cluster.bootstrap, t["input_topic"], [orjson.dumps(d) for d in more])
        docs.extend(more)

    top_up(1000)
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = worker_env(cluster.bootstrap, tiny_model, group=group, **t, **FAST_GROUP)
    log = tmp_path / "worker.log"
    log.touch()
    history = [[0, 0, 0]]
    for kill in range(kills):
        if len(docs) - sum(history[-1]) < 500:
            top_up(500)
        since = log.stat().st_size
        proc = fork_worker(ctx, env, log)
        assert wait_for_assignment(proc, log, since, 90), f"cycle {kill}: no assignment\n" + log.read_text()[-3000:]
        # mid-stream: once this worker has committed something, at a random moment of what follows
        wait_for(lambda: sum(committed_offsets(cluster.bootstrap, group, t["input_topic"], 3)) > sum(history[-1]),
                 60, f"cycle {kill}: a first commit")
        time.sleep(rng.uniform(0.0, 0.5))
        proc.kill()
        proc.join(30)
        assert proc.exitcode == -signal.SIGKILL
        history.append(committed_offsets(cluster.bootstrap, group, t["input_topic"], 3))
        assert all(a <= b for a, b in zip(history[-2], history[-1])), f"offsets moved backwards: {history}"
        assert sum(history[-1]) < len(docs), f"cycle {kill}: nothing left to process when killed: {history}"
    proc = fork_worker(ctx, env, log)
    ids = {d["id"] for d in docs}
    try:
        outs = by_id(read_until_ids(cluster.bootstrap, t["output_topic"], ids, timeout_s=240))
    finally:
        proc.terminate()  # SIGTERM: drain, commit, exit 0
        proc.join(90)
    assert proc.exitcode == 0, log.read_text()[-3000:]
    assert_complete_and_consistent(outs, ids, strict=is_apache(cluster))
    if is_apache(cluster):
        assert_complete_and_consistent(everything_committed(cluster, t["output_topic"], len(ids)), ids, strict=True)
    committed, ends = committed_equals_end(cluster.bootstrap, group, t["input_topic"], 3)
    assert committed == ends, "every input offset is committed once its summary is out"


@on_both_brokers
def test_group_grows_and_shrinks_mid_stream(cluster, cluster_topic, tiny_model, tmp_path):
    t = topics(cluster_topic, partitions=6)
    docs = mixed_docs(1000 if is_apache(cluster) else 1500, seed=5)  # fewer than before on Tansu: CI time
    produce(cluster.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    group = f"g-{uuid.uuid4().hex[:8]}"
    procs = {slot: start_worker(worker_env(cluster.bootstrap, tiny_model, group=group, slot=slot, **t),
                                tmp_path / f"w{slot}.log") for slot in range(3)}
    try:
        consume_all(cluster.bootstrap, t["output_topic"], 300, timeout_s=120)
        procs[3] = start_worker(worker_env(cluster.bootstrap, tiny_model, group=group, slot=3, **t),
                                tmp_path / "w3.log")
        consume_all(cluster.bootstrap, t["output_topic"], 900, timeout_s=120)
        procs[0].send_signal(signal.SIGTERM)  # one leaves (drains and commits)
        assert procs[0].wait(90) == 0
        got = read_until_ids(cluster.bootstrap, t["output_topic"], {d["id"] for d in docs}, timeout_s=300)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(90) for p in procs.values()]
    assert codes == [0, 0, 0, 0]
    assert_complete_and_consistent(by_id(got), {d["id"] for d in docs}, strict=is_apache(cluster))
    if is_apache(cluster):
        assert_complete_and_consistent(everything_committed(cluster, t["output_topic"], len(docs)),
                                       {d["id"] for d in docs}, strict=True)
    committed, ends = committed_equals_end(cluster.bootstrap, group, t["input_topic"], 6)
    assert committed == ends


def test_one_sigterm_stops_a_worker_whose_broker_is_unreachable(tiny_model, tmp_path):
    """Every wait at start sees the stop signal: one SIGTERM, exit 0 (it took two, and 143, before)."""
    from worker.kafka.broker import free_port

    log = tmp_path / "worker.log"
    names = {"input_topic": "none-in", "output_topic": "none-out", "dlq_topic": "none-dlq"}
    proc = start_worker(worker_env(f"127.0.0.1:{free_port()}", tiny_model, group="g-none", **names), log)
    try:  # the model is loaded: the worker retries its producer against a closed port
        wait_for(lambda: "init_transactions not done" in log.read_text() or proc.poll() is not None, 120,
                 "the worker to retry its producer")
        assert proc.poll() is None, log.read_text()[-2000:]
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert rc == 0, log.read_text()[-2000:]
