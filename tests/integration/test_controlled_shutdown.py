"""Controlled shutdown (issue 9: "a clean bounce loses no availability beyond one metadata
round trip"; Kafka's ControlledShutdown): a broker stopped with SIGTERM moves its
leaderships away while it still runs, so producers fail over before it stops serving.

The availability test stops the leader of a one-partition RF-3 topic under an acks=all
producer and measures the longest time between two acknowledgements. A clean stop of a
broker with small logs ends in a fraction of a second and closes its ZooKeeper session, so
even a broker that moved nothing would fail over quickly here; a real one spends seconds
flushing and closing its logs after it stops serving. The test makes that time visible: the
moment the old leader has closed its listener and every connection, it is paused (SIGSTOP)
for ``SLOW_STOP_S`` with its session still open. Leaderships moved before that moment cost
one metadata round trip; leaderships left behind stay on a broker that serves nobody until
it goes on.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster

TOPIC = "bounce"
# Long enough that the paused broker keeps its session (kazoo pings every third of it):
# an expiry would have it register again on resuming.
SESSION_TIMEOUT_MS = 10_000
# How long the old leader's stop takes after it stopped serving (a large log being flushed).
SLOW_STOP_S = 5.0
# The bound on the longest wait between two acknowledgements. A correct handover measured
# 0.1-1.4 s on a 2-core box (most of it librdkafka waiting for its next metadata refresh
# after the old leader's connection closed); leaderships left on the stopping broker cost
# at least SLOW_STOP_S (measured 6-7 s with the controlled shutdown disabled).
MAX_GAP_S = 3.0


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(
        tmp_path, zk_connect, 3, {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    ).start()
    try:
        yield c
    finally:
        for broker in c.brokers:
            if broker.proc is not None and broker.proc.poll() is None:
                os.kill(broker.proc.pid, signal.SIGCONT)
        c.kill()


class AckClock:
    """An idempotent acks=all producer writing to partition 0 until stopped; remembers
    when each acknowledgement arrived."""

    def __init__(self, bootstrap: str) -> None:
        self.acked_at: list[float] = []
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked_at.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.produce(TOPIC, b"x", partition=0, on_delivery=self._on_delivery)
            self._producer.poll(0.002)

    def __enter__(self) -> AckClock:
        self._thread.start()
        return self

    def wait_for_more(self, extra: int, timeout: float = 60) -> None:
        target = len(self.acked_at) + extra
        deadline = time.monotonic() + timeout
        while len(self.acked_at) < target:
            assert time.monotonic() < deadline, f"stuck at {len(self.acked_at)} acknowledgements"
            time.sleep(0.02)

    def longest_gap(self, since: float) -> tuple[float, float]:
        """(longest time between two acknowledgements after ``since``, when it began)."""
        times = [t for t in self.acked_at if t >= since]
        return max(((b - a, a - since) for a, b in itertools.pairwise(times)))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(60) == 0


# /proc/net/tcp socket states (include/net/tcp_states.h).
TCP_ESTABLISHED, TCP_LISTEN = "01", "0A"


def serves(port: int) -> bool:
    """Whether anything still listens on, or holds an open connection at, 127.0.0.1:``port``
    (a broker stops serving when it has closed its listener and every client connection)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        if int(local.split(":")[1], 16) == port and state in (TCP_ESTABLISHED, TCP_LISTEN):
            return True
    return False


def test_a_clean_stop_of_the_leader_costs_one_metadata_round_trip(
    cluster: ProcessCluster,
) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(
        30
    )
    cluster.wait_for_full_isr(TOPIC, 1, 3)
    with AckClock(cluster.bootstrap) as producer:
        producer.wait_for_more(300)
        victim = cluster.leader_of(TOPIC, 0)
        broker = cluster.brokers[victim]
        assert broker.proc is not None
        signalled = time.monotonic()
        broker.proc.send_signal(signal.SIGTERM)
        deadline = signalled + 30
        while serves(broker.port):
            assert time.monotonic() < deadline, "the broker never stopped serving"
            time.sleep(0.002)
        os.kill(broker.proc.pid, signal.SIGSTOP)
        stopped_serving = time.monotonic() - signalled
        time.sleep(SLOW_STOP_S)
        os.kill(broker.proc.pid, signal.SIGCONT)
        assert broker.proc.wait(30) == 0
        broker._close()
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]
    gap, began = producer.longest_gap(signalled - 1)
    assert gap < MAX_GAP_S, (
        f"no acknowledgement for {gap:.2f} s from {began - 1:.2f} s after SIGTERM (the "
        f"leader stopped serving {stopped_serving:.2f} s after it)"
    )
    assert cluster.leader_of(TOPIC, 0) not in (-1, victim)


def test_the_only_in_sync_replica_stops_without_waiting(cluster: ProcessCluster) -> None:
    """A broker that is the only ISR member of a replicated partition cannot hand it to
    anyone (unclean election off); its stop must not wait for that (Kafka retries
    controlled.shutdown.max.retries times, then stops anyway; tierlog bounds the wait at
    30 s)."""
    lonely, other = 1, 2
    admin = cluster.admin()
    admin.create_topics(
        [NewTopic("lonely", num_partitions=1, replica_assignment=[[lonely, other]])]
    )["lonely"].result(30)
    cluster.wait_for_full_isr("lonely", 1, 2)
    assert cluster.brokers[other].stop() == 0
    cluster.wait_until(
        lambda: list(cluster.partitions("lonely")[0].isrs) == [lonely], "the ISR to shrink"
    )
    started = time.monotonic()
    assert cluster.brokers[lonely].stop(60) == 0
    took = time.monotonic() - started
    assert took < 10, f"the stop took {took:.1f} s"
