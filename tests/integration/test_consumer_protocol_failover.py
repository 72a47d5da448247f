"""KIP-848 across a 3-broker cluster: the coordinator of a consumer group is SIGKILLed while
two librdkafka members (``group.protocol=consumer``) consume and commit. The leader of the
group's ``__consumer_offsets`` partition that takes over replays the group's records: every
acknowledged commit is there, the members carry on with their epochs (not fenced), and
every record is read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, request

pytestmark = pytest.mark.timeout(300)

TOPIC = "failover848"
GROUP = "failover848-group"
PARTITIONS = 3
RECORDS = 3000
FAST_GROUPS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
}


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, FAST_GROUPS).start()
    try:
        yield c
    finally:
        c.kill()


def member(cluster: ProcessCluster, name: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


class Member:
    """One consumer, what it read, and its acknowledged commits (partition -> offset)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.values: set[int] = set()
        self.acked: dict[int, int] = {}
        self.uncommitted = 0

    def poll(self, commit_every: int | None) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.values.add(int(msg.value()))
            self.uncommitted += 1
        if commit_every is not None and self.uncommitted >= commit_every:
            self.commit()

    def commit(self) -> bool:
        try:
            done = self.consumer.commit(asynchronous=False)
        except KafkaException:
            return False  # the coordinator moved: retried with the next batch
        self.uncommitted = 0
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), tp.offset)
        return True


def committed(cluster: ProcessCluster) -> dict[int, int]:
    """The group's committed offsets as any client fetches them (OffsetFetch, no member)."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    try:
        found = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        reader.close()


def epochs(cluster: ProcessCluster, broker: int) -> tuple[int, dict[str, int]]:
    """The group epoch and each member's epoch, asked of its coordinator
    (ConsumerGroupDescribe v1)."""
    client = RawClient(cluster.brokers[broker].port)
    try:
        body = request(69, 1, {"group_ids": [GROUP], "include_authorized_operations": False})
        group = client.call(body).groups[0]
    finally:
        client.close()
    assert group.error_code == 0, group
    return group.group_epoch, {m.member_id: m.member_epoch for m in group.members}


def test_coordinator_sigkill_loses_no_committed_offset(cluster: ProcessCluster) -> None:
    admin = cluster.admin()
    topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)
    cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    members = [Member(member(cluster, "m1")), Member(member(cluster, "m2"))]
    for m in members:
        m.consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 90
    # Both members read and commit a part of the topic...
    while not (
        all(m.acked for m in members) and sum(len(m.values) for m in members) >= RECORDS // 3
    ):
        assert time.monotonic() < deadline, "the members did not share the topic"
        for m in members:
            m.poll(commit_every=50)
    for m in members:
        assert m.commit()  # the last commits before the failure, acknowledged
    acked: dict[int, int] = {}
    for m in members:
        for p, offset in m.acked.items():
            acked[p] = max(acked.get(p, 0), offset)
    description = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
    coordinator = int(description.coordinator.id)
    assert len(description.members) == 2
    before = epochs(cluster, coordinator)

    # ... then their coordinator dies without a word.
    cluster.brokers[coordinator].kill()
    # The next coordinator has every acknowledged commit (replayed, never lost).
    cluster.wait_until(
        lambda: all(committed(cluster).get(p, -1) >= o for p, o in acked.items()),
        "the acknowledged commits from the new coordinator",
        timeout=60,
    )
    assert {p: committed(cluster)[p] for p in acked} == acked

    # The members carry on with the new coordinator and read everything.
    deadline = time.monotonic() + 120
    while len(set().union(*(m.values for m in members))) < RECORDS:
        assert time.monotonic() < deadline, "the members did not finish after the failover"
        for m in members:
            m.poll(commit_every=50)
    for m in members:
        m.commit()
    after = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
    successor = int(after.coordinator.id)
    assert successor != coordinator
    assert all(m.assignment.topic_partitions for m in after.members)
    # The same members at the same epochs: nobody was fenced (a fenced member rejoins at
    # epoch 0, and its leaving and joining would each move the group epoch).
    assert epochs(cluster, successor) == before
    final = committed(cluster)
    assert sum(final.values()) == RECORDS
    for m in members:
        m.consumer.close()
