"""The worker under failure: kill -9 at random moments, and a consumer group that changes shape.

On Tansu, aborted transactional records are visible even to read_committed
consumers, so a crash can surface repeats: we check that nothing is lost and
that any repeat is identical to the first copy (but for timing_ms). Strict
no-repeat checks run against Apache Kafka in test_worker_docker.py.
"""

from __future__ import annotations

import random
import signal
import time
import uuid

import orjson
from helpers import (by_id, committed_equals_end, consume_all, mixed_docs, produce, read_until_ids, same_but_timing,
                     start_worker, topics, wait_for, worker_env)


def assert_complete_and_consistent(outs: dict[str, list[dict]], ids: set[str]) -> None:
    missing = ids - set(outs)
    assert not missing, f"{len(missing)} inputs without a summary, e.g. {sorted(missing)[:5]}"
    for doc_id, copies in outs.items():
        assert all(same_but_timing(copies[0], c) for c in copies[1:]), f"{doc_id} repeated with other content"


def test_kill_9_five_times_loses_nothing(broker, new_topic, tiny_model, tmp_path):
    rng = random.Random(7)
    t = topics(new_topic)
    docs = mixed_docs(5000, seed=4)
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = worker_env(broker.bootstrap, tiny_model, group=group, **t)
    log = tmp_path / "worker.log"
    kills = 0
    seen = 0
    while kills < 5:
        proc = start_worker(env, log)
        # kill at a random moment after some progress (or during start-up, now and then)
        target = seen + rng.randint(50, 400)
        deadline = time.monotonic() + rng.uniform(4, 20)
        while time.monotonic() < deadline:
            seen = len(consume_all(broker.bootstrap, t["output_topic"], target, timeout_s=1))
            if seen >= target:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        kills += 1
    proc = start_worker(env, log)
    ids = {d["id"] for d in docs}
    try:
        outs = by_id(read_until_ids(broker.bootstrap, t["output_topic"], ids, timeout_s=300))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
    assert kills == 5
    assert_complete_and_consistent(outs, ids)
    committed, ends = committed_equals_end(broker.bootstrap, group, t["input_topic"], 3)
    assert committed == ends, "every input offset is committed once its summary is out"


def test_group_grows_and_shrinks_mid_stream(broker, new_topic, tiny_model, tmp_path):
    t = topics(new_topic, partitions=6)
    docs = mixed_docs(3000, seed=5)
    produce(broker.bootstrap, t["input_topic"], [orjson.dumps(d) for d in docs])
    group = f"g-{uuid.uuid4().hex[:8]}"
    procs = {slot: start_worker(worker_env(broker.bootstrap, tiny_model, group=group, slot=slot, **t),
                                tmp_path / f"w{slot}.log") for slot in range(3)}
    try:
        consume_all(broker.bootstrap, t["output_topic"], 300, timeout_s=120)
        procs[3] = start_worker(worker_env(broker.bootstrap, tiny_model, group=group, slot=3, **t),
                                tmp_path / "w3.log")
        consume_all(broker.bootstrap, t["output_topic"], 900, timeout_s=120)
        procs[0].send_signal(signal.SIGTERM)  # one leaves (drains and commits)
        assert procs[0].wait(90) == 0
        got = read_until_ids(broker.bootstrap, t["output_topic"], {d["id"] for d in docs}, timeout_s=300)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(90) for p in procs.values()]
    assert codes == [0, 0, 0, 0]
    assert_complete_and_consistent(by_id(got), {d["id"] for d in docs})
    committed, ends = committed_equals_end(broker.bootstrap, group, t["input_topic"], 6)
    assert committed == ends


def test_one_sigterm_stops_a_worker_whose_broker_is_unreachable(tiny_model, tmp_path):
    """Every wait at start sees the stop signal: one SIGTERM, exit 0 (it took two, and 143, before)."""
    from worker.kafka.broker import free_port

    log = tmp_path / "worker.log"
    names = {"input_topic": "none-in", "output_topic": "none-out", "dlq_topic": "none-dlq"}
    proc = start_worker(worker_env(f"127.0.0.1:{free_port()}", tiny_model, group="g-none", **names), log)
    try:  # the model is loaded (its budget logged): the worker now waits for the producer
        wait_for(lambda: "token budget" in log.read_text() or proc.poll() is not None, 120, "the model to load")
        time.sleep(2)
        assert proc.poll() is None, log.read_text()[-2000:]
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert rc == 0, log.read_text()[-2000:]
