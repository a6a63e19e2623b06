"""The benchmarks' load process (bench/loadgen.py): it produces at the asked rate and reads
every output once, in a process of its own, on the same clock as the worker."""

from __future__ import annotations

import threading
import time

import orjson
from confluent_kafka import TopicPartition

from bench.loadgen import OutputReader, OutputTopic, SteadyLoad, Topics
from worker.kafka import clients
from worker.kafka.config import plain_config


def _echo(bootstrap: str, src: str, dst: str, n: int, stop: threading.Event) -> None:
    """A stand-in worker: each input becomes an output with the worker's timing fields."""
    conf = plain_config(bootstrap)
    c = clients.consumer(conf.tool_consumer("echo", **{"fetch.wait.max.ms": 10}))
    c.assign([TopicPartition(src, p, 0) for p in range(2)])
    p = clients.producer(conf.tool_producer(**{"linger.ms": 0}))
    done = 0
    while done < n and not stop.is_set():
        for m in c.consume(100, 0.05):
            if m.error() is None:
                d = orjson.loads(m.value())
                out = {"id": d["id"], "timing_ms": {"queued": 1.0, "gpu": 2.0, "total": 3.0},
                       "tokens": {"input": 10, "output": 4}}
                p.produce(dst, value=orjson.dumps(out))
                done += 1
        p.poll(0)
    p.flush(10)
    c.close()


def test_steady_load_produces_at_its_rate_and_reads_each_output_once(broker, new_topic):
    src, dst = new_topic("load-in", partitions=2), new_topic("load-out", partitions=2)
    docs = [{"id": f"d{i}", "document": "x"} for i in range(20)]
    stop = threading.Event()
    echo = threading.Thread(target=_echo, args=(broker.bootstrap, src, dst, len(docs), stop))
    echo.start()
    try:
        load = SteadyLoad(Topics(broker.bootstrap, src, dst, 2), docs, rate=40.0, timeout_s=20)
        before = time.monotonic()
        t_start = load.start()
        after = time.monotonic()
        sent, seen = load.result()
    finally:
        stop.set()
        echo.join(10)
    assert sorted(sent) == sorted(seen) == sorted(d["id"] for d in docs)
    assert before <= t_start <= after  # the load process's times are on this process's clock
    starts = sorted(sent.values())
    assert t_start <= starts[0] < t_start + 0.5
    assert 0.4 <= starts[-1] - starts[0] <= 2.0  # 20 documents at 40/s: about 0.475 s apart end to end
    assert all(seen[i][0] >= sent[i] for i in sent)  # read after produced
    assert seen["d0"][1] == {"queued": 1.0, "gpu": 2.0, "total": 3.0} and seen["d0"][2]["output"] == 4


def test_output_reader_stops_at_n_and_at_its_timeout(broker, new_topic):
    dst = new_topic("read-out", partitions=2)
    p = clients.producer(plain_config(broker.bootstrap).tool_producer())
    for i in range(5):
        p.produce(dst, value=orjson.dumps({"id": f"o{i}", "timing_ms": {}, "tokens": {"input": 1, "output": 1}}))
    p.flush(10)
    assert sorted(OutputReader(OutputTopic(broker.bootstrap, dst, 2), 5, timeout_s=20).result()) == [f"o{i}" for i in range(5)]
    t0 = time.monotonic()
    assert len(OutputReader(OutputTopic(broker.bootstrap, dst, 2), 6, timeout_s=2).result()) == 5  # one never comes
    assert time.monotonic() - t0 < 15


def test_output_reader_of_windows_stops_when_their_windows_hold_n_records(broker, new_topic):
    dst = new_topic("read-win", partitions=2)
    p = clients.producer(plain_config(broker.bootstrap).tool_producer())
    for i, records in enumerate((3, 4, 5)):  # one partition: read in this order
        out = {"id": f"w{i}", "timing_ms": {}, "tokens": {"input": 1, "output": 1}, "window": {"records": records}}
        p.produce(dst, value=orjson.dumps(out), partition=1)
    p.flush(10)
    seen = OutputReader(OutputTopic(broker.bootstrap, dst, 2), 7, timeout_s=20, windows=True).result()
    assert sorted((k, v[3]) for k, v in seen.items()) == [("w0", 3), ("w1", 4)]  # 7 records: the first two
    seen = OutputReader(OutputTopic(broker.bootstrap, dst, 2), 13, timeout_s=2, windows=True).result()
    assert sorted(seen) == ["w0", "w1", "w2"]  # 13 never come: all there is, at the timeout
