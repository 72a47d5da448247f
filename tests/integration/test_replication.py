"""Kafka's replication system test, reproduced (tests/kafkatest/tests/core/replication_test.py):
3 brokers, a topic with 3 partitions, RF 3, min.insync.replicas 2, an idempotent acks=all
producer running throughout; failures against the leader of partition 0 and, separately,
against the controller: clean shutdown, hard kill (SIGKILL), clean bounces and hard
bounces. Every acknowledged record must be consumed, none twice, in order per partition.

Kafka's five bounces per case; each round is short (2 s ZooKeeper sessions, 100 more
acknowledged records while the victim is down) so the whole matrix runs in CI.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster

TOPIC = "replication-test"
PARTITIONS = 3
# Kafka's test bounces 5 times, and so does CI; TIERLOG_BOUNCES=N runs another count.
BOUNCES = int(os.environ.get("TIERLOG_BOUNCES", "5"))


class BackgroundProducer:
    """Sends an increasing sequence, value n to partition n % 3, acks=all, idempotent, until
    stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, **config: object) -> None:
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 60_000,
                "linger.ms": 2,
                **config,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[msg.partition()].append(int(msg.value()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(
                TOPIC, b"%d" % n, partition=n % PARTITIONS, on_delivery=self._on_delivery
            )
            n += 1
            self._producer.poll(0.002)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def wait_for_more(self, extra: int, timeout: float = 60) -> None:
        """Wait until ``extra`` more records are acknowledged (the cluster serves writes)."""
        target = self.count() + extra
        deadline = time.monotonic() + timeout
        while self.count() < target:
            assert time.monotonic() < deadline, f"stuck at {self.count()} acknowledged records"
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(90) == 0


def consume(
    cluster: ProcessCluster, expected: dict[int, list[int]], topic: str = TOPIC
) -> dict[int, list[int]]:
    """Every record of ``topic``'s partitions in ``expected`` (assigned, from offset 0),
    as ints, until as many as ``expected`` holds arrived or 60 s passed."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "checker", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in expected])
    seen: dict[int, list[int]] = {p: [] for p in expected}
    want = sum(len(v) for v in expected.values())
    deadline = time.monotonic() + 60
    try:
        while sum(len(v) for v in seen.values()) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen[msg.partition()].append(int(msg.value()))
    finally:
        consumer.close()
    return seen


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, {"offsets.topic.replication.factor": "3"}).start()
    try:
        admin = c.admin()
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        c.wait_for_full_isr(TOPIC, PARTITIONS, 3)
        yield c
    finally:
        c.kill()


def leader_of_partition_0(cluster: ProcessCluster) -> int:
    return cluster.leader_of(TOPIC, 0)


def controller(cluster: ProcessCluster) -> int:
    admin = cluster.admin()
    return int(admin.describe_cluster().result(10).controller.id)


def clean_shutdown(cluster: ProcessCluster, victim: int) -> None:
    assert cluster.brokers[victim].stop() == 0


def hard_shutdown(cluster: ProcessCluster, victim: int) -> None:
    cluster.brokers[victim].kill()


def bounce(shutdown: Callable[[ProcessCluster, int], None]) -> Callable[..., None]:
    def run(cluster: ProcessCluster, victim: int, producer: BackgroundProducer) -> None:
        shutdown(cluster, victim)
        producer.wait_for_more(100)
        cluster.brokers[victim].start(timeout=60)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)

    return run


FAILURES = {
    "clean_shutdown": clean_shutdown,
    "hard_shutdown": hard_shutdown,
    "clean_bounce": bounce(clean_shutdown),
    "hard_bounce": bounce(hard_shutdown),
}
TARGETS = {"leader": leader_of_partition_0, "controller": controller}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("target", list(TARGETS))
def test_replication(cluster: ProcessCluster, target: str, failure: str) -> None:
    with BackgroundProducer(cluster.bootstrap) as producer:
        producer.wait_for_more(300)
        rounds = BOUNCES if failure.endswith("bounce") else 1
        for _ in range(rounds):
            victim = TARGETS[target](cluster)
            action = FAILURES[failure]
            if failure.endswith("bounce"):
                action(cluster, victim, producer)
            else:
                action(cluster, victim)
                producer.wait_for_more(300)
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]
    seen = consume(cluster, producer.acked)
    for p in range(PARTITIONS):
        acked = producer.acked[p]
        missing = set(acked) - set(seen[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"
        assert len(seen[p]) == len(set(seen[p])), f"partition {p}: duplicates"
        assert seen[p] == sorted(seen[p]), f"partition {p}: out of order"
