"""Topic deletion is total in a cluster too (issue 20, item 5): a broker that is down while a
topic is deleted, or killed (kill -9) while it deletes, must never serve the deleted records
to the topic created again under the same name. Three real broker processes on a real
ZooKeeper; the new topic's partitions are all led by the broker that was killed."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster_harness import ProcessCluster

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 8
MESSAGES = 2000
VICTIM = 2  # the broker killed, and the preferred leader of the topic created again


def create(cluster: ProcessCluster, name: str, leader_first: int) -> None:
    """``name`` with PARTITIONS partitions on all three brokers, ``leader_first`` leading."""
    others = [b for b in range(3) if b != leader_first]
    assignment = [[leader_first, *others] for _ in range(PARTITIONS)]
    admin = cluster.admin()
    new = NewTopic(name, num_partitions=PARTITIONS, replica_assignment=assignment)
    admin.create_topics([new])[name].result(30)
    cluster.wait_for_full_isr(name, PARTITIONS, 3)


def produce(cluster: ProcessCluster, name: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(MESSAGES):
        producer.produce(name, value=b"old-%06d" % i, partition=i % PARTITIONS)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def read_all(cluster: ProcessCluster, name: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "deletion-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{name}: ends not reached ({at_end})"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                if error.retriable():
                    continue
                raise AssertionError(error)
            values.append(message.value() or b"")
    finally:
        consumer.close()
    return values


def listed(cluster: ProcessCluster, name: str) -> bool:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    return name in admin.list_topics(timeout=10).topics


def restart_victim(cluster: ProcessCluster) -> None:
    """Start the killed broker again once its ZooKeeper session has ended (a start within
    the session timeout is refused: its old registration is still live)."""
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    cluster.wait_until(
        lambda: VICTIM not in admin.list_topics(timeout=5).brokers, "the killed broker's expiry"
    )
    cluster.brokers[VICTIM].start(timeout=60)
    cluster.wait_until(
        lambda: VICTIM in admin.list_topics(timeout=5).brokers, "the broker's return"
    )


def test_deleted_records_never_come_back_after_a_broker_dies_during_deletion(
    tmp_path: Path, zk_connect: str
) -> None:
    rng = random.Random(205)
    cluster = ProcessCluster(tmp_path, zk_connect, 3).start()
    try:
        for round_ in range(5):
            name = f"doomed-{round_}"
            create(cluster, name, leader_first=round_ % 3)
            produce(cluster, name)
            admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
            if round_ == 0:
                # Down for the whole deletion: it learns of it only from its next start.
                cluster.brokers[VICTIM].kill()
                admin.delete_topics([name], operation_timeout=30)[name].result(30)
            else:
                future = admin.delete_topics([name], operation_timeout=30)[name]
                time.sleep(rng.uniform(0.0, 0.08))
                cluster.brokers[VICTIM].kill()
                future.result(30)  # answered by broker 0, which stays up
            restart_victim(cluster)
            assert not listed(cluster, name), f"round {round_}: deleted, yet listed"
            create(cluster, name, leader_first=VICTIM)
            values = read_all(cluster, name)
            assert values == [], f"round {round_}: the new topic served {len(values)} deleted"
        log_text = cluster.brokers[VICTIM].log_text()
        assert "stray log" in log_text, log_text[-3000:]
    finally:
        cluster.kill()
