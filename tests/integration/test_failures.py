"""Failures beyond clean and hard bounces, against real broker processes and a real
ZooKeeper: a zombie leader (paused past its session), a slow follower, ZooKeeper restarted
under load, the unclean election switch, and a group coordinator failover."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.integration.acked_producer import PARTITIONS, TOPIC, BackgroundProducer
from tests.integration.broker_metrics import UNCLEAN_ELECTIONS, cluster_sum
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.test_replication import consume
from tierlog.broker.coordination.zk_server import ZooKeeperServer


def create(cluster: ProcessCluster, topic: str = TOPIC, rf: int = 3, **configs: str) -> None:
    admin = cluster.admin()
    admin.create_topics(
        [NewTopic(topic, PARTITIONS, rf, config={"min.insync.replicas": "2", **configs})]
    )[topic].result(30)
    cluster.wait_for_full_isr(topic, PARTITIONS, rf)


def check_all_acked_consumed(cluster: ProcessCluster, producer: BackgroundProducer) -> None:
    assert not producer.errors, producer.errors[:3]
    seen = consume(cluster, producer.acked)
    for p in range(PARTITIONS):
        missing = set(producer.acked[p]) - set(seen[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"
        assert len(seen[p]) == len(set(seen[p])), f"partition {p}: duplicates"


def pause(cluster: ProcessCluster, broker: int) -> None:
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)


def resume(cluster: ProcessCluster, broker: int) -> None:
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGCONT)


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3).start()
    try:
        yield c
    finally:
        for n in range(3):
            if c.brokers[n].proc is not None:
                resume(c, n)  # a paused process does not die of SIGKILL's cleanup wait
        c.kill()


def test_a_zombie_leader_loses_no_acknowledged_write_and_rejoins_as_follower(
    cluster: ProcessCluster,
) -> None:
    create(cluster)
    # Short client timeouts so that requests stuck on the paused leader are retried
    # elsewhere within the test's bounds (they are never acknowledged by the zombie).
    with BackgroundProducer(
        cluster.bootstrap, **{"request.timeout.ms": 3000, "message.timeout.ms": 60_000}
    ) as producer:
        producer.wait_for_more(300)
        zombie = cluster.leader_of(TOPIC, 0)
        pause(cluster, zombie)
        cluster.wait_until(
            lambda: cluster.leader_of(TOPIC, 0) not in (-1, zombie), "a new leader", 30
        )
        producer.wait_for_more(300)
        resume(cluster, zombie)
        # The old leader finds out it was deposed, truncates what diverged and follows.
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
        producer.wait_for_more(300)
    check_all_acked_consumed(cluster, producer)
    assert cluster.leader_of(TOPIC, 0) != -1


def test_a_slow_follower_leaves_the_isr_and_rejoins(tmp_path: Path, zk_connect: str) -> None:
    # Its ZooKeeper session outlives the pause; replica.lag.time.max.ms does not.
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {"zookeeper.session.timeout.ms": "20000", "replica.lag.time.max.ms": "1000"},
    ).start()
    try:
        create(cluster)
        leader = cluster.leader_of(TOPIC, 0)
        admin = cluster.admin()
        controller = int(admin.describe_cluster().result(10).controller.id)
        # Not the controller: a paused controller answers no AlterPartition until its
        # session ends, which would hold up every ISR change (as in Kafka).
        follower = next(b for b in range(3) if b not in (leader, controller))
        with BackgroundProducer(cluster.bootstrap) as producer:
            producer.wait_for_more(200)
            pause(cluster, follower)
            started = time.monotonic()
            cluster.wait_until(
                lambda: follower not in cluster.partitions(TOPIC)[0].isrs, "the ISR to shrink", 15
            )
            shrunk_after = time.monotonic() - started
            producer.wait_for_more(200)  # min.insync.replicas 2 still met
            resume(cluster, follower)
            cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=30)
        # Kafka checks every half replica.lag.time.max.ms: a shrink is due 1-1.5 s after the
        # pause, then one AlterPartition and the metadata watch; 5 s leaves room for a
        # loaded machine, where a check missed twice or a lag counted from the wrong fetch
        # would not fit.
        assert shrunk_after < 5, f"the ISR shrank only after {shrunk_after:.1f}s"
        check_all_acked_consumed(cluster, producer)
    finally:
        for n in range(3):
            if cluster.brokers[n].proc is not None:
                resume(cluster, n)
        cluster.kill()


def test_zookeeper_restarted_under_load(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk:
        cluster = ProcessCluster(
            tmp_path, f"{zk.connect}/tierlog", 3, {"zookeeper.session.timeout.ms": "6000"}
        ).start()
        try:
            create(cluster)
            with BackgroundProducer(cluster.bootstrap) as producer:
                producer.wait_for_more(300)
                zk.restart()
                producer.wait_for_more(300)  # leaders keep serving without ZooKeeper
                cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
                producer.wait_for_more(300)
            check_all_acked_consumed(cluster, producer)
        finally:
            cluster.kill()


def produce_acked(cluster: ProcessCluster, topics: list[str], values: range) -> list[int]:
    """``values`` to partition 0 of each topic, acks=all; the values every topic acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[str, list[int]] = {topic: [] for topic in topics}

    def delivered(err: object, msg: Any) -> None:
        if err is None:
            acked[msg.topic()].append(int(msg.value()))

    for value in values:
        for topic in topics:
            producer.produce(topic, b"%d" % value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert all(acked[topic] == list(values) for topic in topics), "not all acknowledged"
    return list(values)


def high_watermark(cluster: ProcessCluster, topic: str) -> int:
    """Partition 0's high watermark. A consumer that asked while the partition had no leader
    can keep failing for a while (librdkafka's metadata cache), so each try is a new one."""
    deadline = time.monotonic() + 30
    while True:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader"})
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        finally:
            consumer.close()
        time.sleep(0.5)


def read_partition_0(cluster: ProcessCluster, topic: str) -> list[int]:
    """Everything partition 0 holds below its high watermark, as ints."""
    end = high_watermark(cluster, topic)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[int] = []
        next_offset = 0
        deadline = time.monotonic() + 30
        while next_offset < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(int(msg.value()))
                next_offset = msg.offset() + 1
        assert next_offset >= end, f"{topic}: read up to {next_offset} of {end}"
        return values
    finally:
        consumer.close()


def test_unclean_leader_election_only_when_enabled(tmp_path: Path, zk_connect: str) -> None:
    """Records acknowledged by a leader alone (min.insync.replicas 1) are on no other replica.
    With the leader dead and only the out-of-sync follower back, the partition stays offline
    while unclean election is off, and comes back with everything when the leader returns;
    switched on for a topic, the follower leads at once and those records are gone, which
    the controller reports (UncleanLeaderElections, a warning)."""
    cluster = ProcessCluster(tmp_path, zk_connect, 3, {"metrics.http.port": "0"}).start()
    try:
        off, on = "unclean-off", "unclean-on"
        admin = cluster.admin()
        futures = admin.create_topics(
            [
                NewTopic(
                    t,
                    num_partitions=1,
                    replica_assignment=[[0, 1]],
                    config={"min.insync.replicas": "1"},
                )
                for t in (off, on)
            ]
        )
        for future in futures.values():
            future.result(30)
        for topic in (off, on):
            cluster.wait_for_full_isr(topic, 1, 2)
        on_both = produce_acked(cluster, [off, on], range(0, 100))
        cluster.brokers[1].kill()
        cluster.wait_until(
            lambda: all(list(cluster.partitions(t)[0].isrs) == [0] for t in (off, on)),
            "the ISRs to shrink to the leader",
        )
        leader_only = produce_acked(cluster, [off, on], range(100, 200))
        cluster.brokers[0].kill()
        cluster.brokers[1].start(timeout=60)
        cluster.wait_until(
            lambda: set(cluster.admin().list_topics(timeout=5).brokers) == {1, 2},
            "broker 0 gone and broker 1 back",
        )
        # The controller handles one event at a time, in the order ZooKeeper reported
        # the changes: once a topic created now has its leader, the event of broker 1's
        # return (where an unclean election would have happened) is behind it.
        admin = cluster.admin()
        admin.create_topics([NewTopic("caught-up", num_partitions=1, replica_assignment=[[2]])])[
            "caught-up"
        ].result(30)
        cluster.wait_until(lambda: cluster.leader_of("caught-up", 0) == 2, "the controller")
        assert [cluster.leader_of(t, 0) for t in (off, on)] == [-1, -1]
        assert cluster_sum(cluster, UNCLEAN_ELECTIONS) == 0

        enable = ConfigEntry(
            "unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ConfigResource.Type.TOPIC, on, incremental_configs=[enable])
        admin = cluster.admin()  # kept: a collected client fails its futures
        admin.incremental_alter_configs([resource])[resource].result(30)
        cluster.wait_until(lambda: cluster.leader_of(on, 0) == 1, "the unclean election")
        assert read_partition_0(cluster, on) == on_both  # the leader-only records are lost
        assert cluster_sum(cluster, UNCLEAN_ELECTIONS) == 1
        warnings = [
            line
            for b in cluster.brokers
            for line in b.log_text().splitlines()
            if "UNCLEAN leader election" in line
        ]
        assert len(warnings) == 1 and f"{on}-0" in warnings[0], warnings
        assert cluster.leader_of(off, 0) == -1

        # The replica with every acknowledged record returns and leads: nothing was lost.
        cluster.brokers[0].start(timeout=60)
        cluster.wait_until(lambda: cluster.leader_of(off, 0) == 0, "the clean election")
        assert read_partition_0(cluster, off) == on_both + leader_only
        assert cluster_sum(cluster, UNCLEAN_ELECTIONS) == 1
    finally:
        cluster.kill()


def test_an_offset_commit_waits_for_the_whole_isr(cluster: ProcessCluster) -> None:
    """The group coordinator acknowledges a commit once every ISR member of its
    __consumer_offsets partition has it (Kafka's offsets.commit.required.acks=-1). With
    both followers paused, the commit waits until they leave the ISR
    (replica.lag.time.max.ms, 3 s here); it used to be answered after the local append,
    and lost when the coordinator then died (CI saw it once)."""
    create(cluster)
    group = "patient"
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)  # warm-up
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        coordinator = int(admin.describe_consumer_groups([group])[group].result(30).coordinator.id)
        followers = [b for b in range(3) if b != coordinator]
        for b in followers:
            pause(cluster, b)
        try:
            started = time.monotonic()
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
            waited = time.monotonic() - started
        finally:
            for b in followers:
                resume(cluster, b)
        assert waited > 1.5, f"the commit was acknowledged after {waited:.2f} s"
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 7
    finally:
        consumer.close()


def test_committed_offsets_survive_a_coordinator_failover(cluster: ProcessCluster) -> None:
    create(cluster)
    group = "survivors"
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[TopicPartition(TOPIC, p, 100 + p) for p in range(PARTITIONS)], asynchronous=False
    )
    consumer.close()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coordinator = int(admin.describe_consumer_groups([group])[group].result(30).coordinator.id)
    cluster.brokers[coordinator].kill()

    def committed() -> list[int]:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        try:
            found = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
            return [tp.offset for tp in found]
        finally:
            c.close()

    cluster.wait_until(lambda: committed() == [100, 101, 102], "offsets from the new coordinator")
