"""A replicated cluster of real broker processes on a real ZooKeeper, with real clients:
leaders elected, records replicated to the ISR, failover without losing acknowledged
records (Kafka's replication test, one round of each failure here; bounded in time)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster

TOPIC = "replicated"
PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3).start()
    try:
        yield c
    finally:
        c.kill()


def create_topic(cluster: ProcessCluster, rf: int = 3, min_isr: int = 2) -> None:
    admin = cluster.admin()  # kept referenced until the answer is in
    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, rf, config={"min.insync.replicas": str(min_isr)})]
    )
    futures[TOPIC].result(30)
    cluster.wait_for_full_isr(TOPIC, PARTITIONS, rf)


def produce(cluster: ProcessCluster, values: range) -> set[bytes]:
    """acks=all, idempotent; returns the values the cluster acknowledged."""
    acked: set[bytes] = set()
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.add(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err)

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60_000,
            "linger.ms": 5,
        }
    )
    for n in values:
        producer.produce(TOPIC, b"%d" % n, key=b"%d" % n, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not errors, errors[:3]
    return acked


def consume_all(cluster: ProcessCluster, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "verifier",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # Assigned, not subscribed: with a broker down, __consumer_offsets (replication factor
    # 3) cannot be created, and a group would wait for a coordinator, as in Kafka.
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    try:
        import time

        deadline = time.monotonic() + 60
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen.append(msg.value())
    finally:
        consumer.close()
    return seen


def test_a_replicated_topic_loses_no_acknowledged_record_when_its_leader_is_killed(
    cluster: ProcessCluster,
) -> None:
    create_topic(cluster)
    acked = produce(cluster, range(0, 500))
    victim = cluster.leader_of(TOPIC, 0)
    cluster.brokers[victim].kill()
    cluster.wait_until(
        lambda: cluster.leader_of(TOPIC, 0) not in (-1, victim), "a new leader of partition 0"
    )
    acked |= produce(cluster, range(500, 1000))
    seen = consume_all(cluster, len(acked))
    assert acked <= set(seen), f"lost {len(acked - set(seen))} acknowledged records"
    assert len(seen) == len(set(seen)), "duplicates despite idempotence"

    cluster.brokers[victim].start(timeout=60)
    cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
