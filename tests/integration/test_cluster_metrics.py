"""The cluster's Kafka metrics on each broker's Prometheus endpoint, read while real broker
processes lose and regain a follower and a partition's only replica: UnderReplicatedPartitions,
IsrShrinks/IsrExpands, OfflinePartitionsCount and ActiveControllerCount."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.integration.broker_metrics import (
    ACTIVE_CONTROLLER,
    ISR_EXPANDS,
    ISR_SHRINKS,
    OFFLINE,
    UNCLEAN_ELECTIONS,
    UNDER_REPLICATED,
    cluster_sum,
    live,
    metric,
)
from tests.integration.cluster_harness import ProcessCluster, signal_broker

pytestmark = pytest.mark.timeout(240)


@contextmanager
def producing(bootstrap: str, topic: str) -> Iterator[None]:
    """acks=1 records to ``topic`` for as long as the block runs: a follower that stops
    fetching falls behind (Kafka's lag rule needs the leader's log to move)."""
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})

    def run() -> None:
        while not stop.is_set():
            producer.produce(topic, b"x" * 100)
            producer.poll(0.005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        producer.flush(30)


def test_replication_metrics_follow_a_follower_and_an_offline_partition(
    tmp_path: Path, zk_connect: str
) -> None:
    # The follower is paused (SIGSTOP) past replica.lag.time.max.ms but not past its
    # ZooKeeper session: the leader itself shrinks the ISR, which is what IsrShrinks counts
    # (the controller dropping a dead broker from ISRs is not a shrink, in Kafka neither).
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {
            "zookeeper.session.timeout.ms": "20000",
            "replica.lag.time.max.ms": "1000",
            "metrics.http.port": "0",
        },
    ).start()
    try:
        cluster.wait_until(
            lambda: cluster_sum(cluster, ACTIVE_CONTROLLER) == 1, "one active controller"
        )
        controller = next(n for n in live(cluster) if metric(cluster, n, ACTIVE_CONTROLLER))
        assert controller == int(cluster.admin().describe_cluster().result(10).controller.id)
        # Leader and follower are not the controller: a paused controller would hold up the
        # leader's AlterPartition.
        leader, follower = (n for n in range(3) if n != controller)
        admin = cluster.admin()
        topics = {
            "metered": NewTopic(
                "metered", num_partitions=1, replica_assignment=[[leader, follower, controller]]
            ),
            "solo": NewTopic("solo", num_partitions=1, replica_assignment=[[follower]]),
        }
        for future in admin.create_topics(list(topics.values())).values():
            future.result(30)
        cluster.wait_for_full_isr("metered", 1, 3)
        cluster.wait_for_full_isr("solo", 1, 1)
        assert metric(cluster, leader, UNDER_REPLICATED) == 0
        assert cluster_sum(cluster, OFFLINE) == 0
        shrinks, expands = (
            metric(cluster, leader, ISR_SHRINKS),
            metric(cluster, leader, ISR_EXPANDS),
        )

        with producing(cluster.bootstrap, "metered"):
            signal_broker(cluster, follower, signal.SIGSTOP)
            try:
                cluster.wait_until(
                    lambda: metric(cluster, leader, UNDER_REPLICATED) >= 1,
                    "UnderReplicatedPartitions > 0 on the leader",
                    20,
                )
                # The leader counts the shrink when the controller answers its
                # AlterPartition; its ZooKeeper watch may show the new ISR a moment sooner.
                cluster.wait_until(
                    lambda: metric(cluster, leader, ISR_SHRINKS) > shrinks,
                    "IsrShrinks counted on the leader",
                    10,
                )
                # Every broker learns the new ISR through ZooKeeper, a moment after the leader.
                cluster.wait_until(
                    lambda: follower not in cluster.partitions("metered")[0].isrs,
                    "the metadata to show the shrunk ISR",
                    10,
                )
            finally:
                signal_broker(cluster, follower, signal.SIGCONT)
            cluster.wait_until(
                lambda: metric(cluster, leader, UNDER_REPLICATED) == 0,
                "UnderReplicatedPartitions back to 0 once the follower caught up",
                30,
            )
        cluster.wait_until(
            lambda: metric(cluster, leader, ISR_EXPANDS) > expands,
            "IsrExpands counted on the leader",
            10,
        )
        cluster.wait_for_full_isr("metered", 1, 3)

        # The only replica of "solo" stops: the controller (and only it) counts it offline.
        assert cluster.brokers[follower].stop() == 0
        cluster.wait_until(
            lambda: metric(cluster, controller, OFFLINE) == 1, "OfflinePartitionsCount 1", 20
        )
        assert cluster_sum(cluster, OFFLINE) == 1
        assert metric(cluster, leader, UNDER_REPLICATED) >= 1  # "metered" lost a replica too
        cluster.brokers[follower].start(timeout=60)
        cluster.wait_until(
            lambda: metric(cluster, controller, OFFLINE) == 0, "OfflinePartitionsCount 0", 30
        )
        cluster.wait_until(
            lambda: metric(cluster, leader, UNDER_REPLICATED) == 0, "the follower back in sync", 30
        )
        # Still exactly one controller, and nothing was elected uncleanly.
        assert [n for n in range(3) if metric(cluster, n, ACTIVE_CONTROLLER)] == [controller]
        assert cluster_sum(cluster, UNCLEAN_ELECTIONS) == 0
    finally:
        for n in range(3):
            if cluster.brokers[n].proc is not None:
                signal_broker(cluster, n, signal.SIGCONT)
        cluster.kill()
