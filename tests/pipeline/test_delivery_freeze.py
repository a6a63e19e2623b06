"""The delivery stage against a broker frozen (SIGSTOP) while a transaction is open.

Every transactional call is bounded: a short freeze aborts and retries (nothing lost), a freeze
longer than kafka.delivery_stuck_s turns /healthz red and then stops delivery with a
FatalDeliveryError (the worker exits 1 and a supervisor restarts it). Real producer, real broker
(private: freezing it touches no other test), real tracker; the tracker is fed by the test.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.error
import urllib.request

from helpers import consume_all, frozen, wait_for

from worker.pipeline.configs import delivery_config
from worker.kafka import clients
from worker.kafka.config import client_config
from worker.pipeline.delivery import Delivery, FatalDeliveryError
from worker.observability.metrics import HealthServer, Metrics, Probes
from worker.pipeline.tracker import OffsetTracker, Record
from worker.config.settings import KafkaSettings, Settings

CALL_S, STUCK_S = 2.0, 12.0
IN = ("rel-in", 0)


def healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def feed(tracker: OffsetTracker, epoch: int, offsets: range) -> None:
    for off in offsets:
        assert tracker.see(IN, epoch, off)
        tracker.complete(IN, epoch, off, (Record("rel-out", f"k{off}".encode(), f"v{off}".encode()),))


def test_a_frozen_broker_never_blocks_delivery_for_good(private_broker):
    b = private_broker
    b.create_topics({"rel-in": 1, "rel-out": 1})
    settings = Settings(kafka=KafkaSettings(input_topics=("rel-in",), output_topic="rel-out", dlq_topic="rel-dlq",
                                            group_id="g-rel", worker_slot=0, delivery_stuck_s=STUCK_S))
    conf = client_config(settings.kafka, bootstrap=b.bootstrap)
    consumer = clients.consumer(conf.consumer)
    tracker, metrics = OffsetTracker(), Metrics()
    config = dataclasses.replace(delivery_config(settings), txn_call_timeout_s=CALL_S)  # shorter than 1/12 of stuck
    delivery = Delivery(config=config, make_producer=clients.Clients(conf).producer,
                        tracker=tracker, metrics=metrics)
    delivery.commits.publish(consumer.consumer_group_metadata())
    health = HealthServer(metrics, "127.0.0.1", 0,
                          Probes(health=delivery.health)).start()
    thread = threading.Thread(target=delivery.run, name="ribbon-delivery", daemon=True)
    thread.start()
    try:
        assert delivery.started.wait(30) and delivery.error is None
        epoch = tracker.assign(IN)
        feed(tracker, epoch, range(0, 5))
        delivery.wake()
        wait_for(lambda: metrics.txn_commits._value.get() >= 1, 30, "the first transaction")

        # A short freeze with a transaction open: calls time out, the transaction aborts, the runs retry.
        with frozen(b.pid):
            feed(tracker, epoch, range(5, 10))
            delivery.wake()
            wait_for(lambda: delivery.stuck_for() > CALL_S, 10, "a transaction under way in the freeze")
            time.sleep(2 * CALL_S)
        wait_for(lambda: tracker.pending() == 0, STUCK_S + 20, "the runs of the freeze to be committed")
        assert delivery.error is None and thread.is_alive()
        values = {m.value() for m in consume_all(b.bootstrap, "rel-out", 10, timeout_s=20)}
        assert {f"v{i}".encode() for i in range(10)} <= values, "nothing lost"
        assert healthz(health.port) == 200

        # A freeze past kafka.delivery_stuck_s: /healthz turns red, then delivery stops (exit 1 for the worker).
        with frozen(b.pid):
            feed(tracker, epoch, range(10, 15))
            delivery.wake()
            wait_for(lambda: healthz(health.port) == 503, STUCK_S, "/healthz to turn red")
            # The app's watchdog (Worker.failed) reads failure(): the worker stops and exits 1.
            wait_for(lambda: delivery.failure() is not None, STUCK_S, "delivery to give up")
        assert isinstance(delivery.failure(), FatalDeliveryError)
    finally:
        delivery.stop()
        delivery.wake()
        health.stop()
        consumer.close()
