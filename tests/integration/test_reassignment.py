"""Moving partitions and leaders on real broker processes and a real ZooKeeper:
AlterPartitionReassignments under an acks=all idempotent producer (nothing acknowledged is
lost, duplicated or reordered, and the old replica's log is deleted),
ListPartitionReassignments while one is in progress and its cancellation, ElectLeaders
(preferred) after a leader bounce, the automatic leader rebalance, and a controller
fail-over in the middle of a reassignment.

confluent-kafka's AdminClient has ``elect_leaders`` but no reassignment APIs, so those go
as raw kio requests to the controller (found through Metadata, as Kafka's admin client
does). A reassignment is held "in progress" deterministically by freezing (SIGSTOP) the
broker it adds: it is still registered for a moment, so the request is accepted, and it
cannot catch up until it is thawed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.acked_producer import BackgroundProducer
from tests.integration.cluster_harness import ProcessCluster
from tests.integration.test_replication import consume
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(90)

NOT_CONTROLLER = 41


# -- the controller's APIs ------------------------------------------------------------------


def controller_id(cluster: ProcessCluster) -> int:
    admin = cluster.admin()  # kept alive until the answer: a destroyed client fails it
    return int(admin.describe_cluster().result(10).controller.id)


def call_controller(cluster: ProcessCluster, body: Any, timeout: float = 30.0) -> Any:
    """Send ``body`` to the controller, retrying where it answers NOT_CONTROLLER (a
    fail-over in between), as Kafka's admin client does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            broker = cluster.brokers[controller_id(cluster)]
            client = RawClient(broker.port)
            try:
                response = client.call(body)
            finally:
                client.close()
            if int(response.error_code) != NOT_CONTROLLER:
                return response
        except Exception:
            if time.monotonic() > deadline:
                raise
        assert time.monotonic() < deadline, "no controller answered"
        time.sleep(0.2)


def alter_reassignments(
    cluster: ProcessCluster, topic: str, targets: dict[int, list[int] | None]
) -> dict[int, int]:
    """AlterPartitionReassignments v1; the error code of each partition."""
    body = request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        1,
        {
            "timeout": 30_000,
            "allow_replication_factor_change": True,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "replicas": r} for p, r in targets.items()
                    ],
                }
            ],
        },
    )
    response = call_controller(cluster, body)
    assert int(response.error_code) == 0, response
    return {
        int(p.partition_index): int(p.error_code) for t in response.responses for p in t.partitions
    }


def list_reassignments(cluster: ProcessCluster) -> dict[tuple[str, int], tuple[list[int], ...]]:
    """ListPartitionReassignments v0 of everything: (replicas, adding, removing)."""
    body = request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 30_000, "topics": None})
    response = call_controller(cluster, body)
    assert int(response.error_code) == 0, response
    return {
        (t.name, int(p.partition_index)): (
            [int(r) for r in p.replicas],
            [int(r) for r in p.adding_replicas],
            [int(r) for r in p.removing_replicas],
        )
        for t in response.topics
        for p in t.partitions
    }


def replicas_of(cluster: ProcessCluster, topic: str) -> dict[int, list[int]]:
    return {p: list(m.replicas) for p, m in cluster.partitions(topic).items()}


def create_topic(cluster: ProcessCluster, topic: str, assignment: list[list[int]]) -> None:
    new = NewTopic(
        topic,
        num_partitions=len(assignment),
        replica_assignment=assignment,
        config={"min.insync.replicas": "2"},
    )
    admin = cluster.admin()  # kept: a destroyed client fails its futures
    admin.create_topics([new])[topic].result(30)
    cluster.wait_for_full_isr(topic, len(assignment), len(assignment[0]))


def freeze(cluster: ProcessCluster, broker: int) -> None:
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)


def thaw(cluster: ProcessCluster, broker: int) -> None:
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGCONT)


def partition_dir(cluster: ProcessCluster, broker: int, topic: str, partition: int) -> Path:
    return cluster.brokers[broker].data_dir / f"{topic}-{partition}"


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: Any) -> Iterator[Any]:
    """Four brokers for the whole module; each test uses topics of its own. The automatic
    rebalance is off here (test_auto_leader_rebalance has a cluster of its own): on a
    loaded machine its first check, 5 s after a controller fail-over, could give the
    ElectLeaders test's partition back before the test asks for it."""
    import uuid

    connect = f"{zookeeper_server.connect}/tierlog-reassign-{uuid.uuid4().hex}"
    c = ProcessCluster(
        tmp_path_factory.mktemp("reassign"),
        connect,
        4,
        {"offsets.topic.replication.factor": "3", "auto.leader.rebalance.enable": "false"},
    )
    try:
        c.start()
        yield c
    finally:
        for broker in c.brokers:
            if broker.proc is not None:
                os.kill(broker.proc.pid, signal.SIGCONT)
        c.kill()


# -- tests ---------------------------------------------------------------------------------


def test_reassignment_under_load_loses_nothing(cluster: ProcessCluster) -> None:
    topic = "moving"
    create_topic(cluster, topic, [[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    targets = {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 3, 1]}
    with BackgroundProducer(cluster.bootstrap, topic) as producer:
        producer.wait_for_more(300)
        assert alter_reassignments(cluster, topic, dict(targets.items())) == {0: 0, 1: 0, 2: 0}
        cluster.wait_until(
            lambda: replicas_of(cluster, topic) == targets and not list_reassignments(cluster),
            "the reassignment to complete",
            timeout=40,
        )
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]
    # The new replicas lead where the old leader left, and every target replica is in sync.
    cluster.wait_for_full_isr(topic, 3, 3)
    for p, meta in cluster.partitions(topic).items():
        assert meta.leader in targets[p]
    # Broker 0 no longer hosts the topic: its logs are deleted.
    cluster.wait_until(
        lambda: not any(partition_dir(cluster, 0, topic, p).exists() for p in range(3)),
        "broker 0 to delete its replicas",
        timeout=20,
    )
    assert all(partition_dir(cluster, 3, topic, p).exists() for p in range(3))
    seen = consume(cluster, producer.acked, topic)
    for p, acked in producer.acked.items():
        missing = set(acked) - set(seen[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"
        assert len(seen[p]) == len(set(seen[p])), f"partition {p}: duplicates"
        assert seen[p] == sorted(seen[p]), f"partition {p}: out of order"


def test_list_shows_a_reassignment_in_progress_and_cancel_reverts_it(
    cluster: ProcessCluster,
) -> None:
    topic = "listed"
    create_topic(cluster, topic, [[0, 1, 2], [0, 1, 2]])
    adding = 3 if controller_id(cluster) != 3 else 2
    origin = [b for b in range(4) if b != adding][:3]
    if origin != [0, 1, 2]:
        pytest.fail("the controller moved to broker 3 meanwhile; origin must be 0, 1, 2")
    freeze(cluster, adding)  # registered for ~2 s more, and cannot catch up
    try:
        codes = alter_reassignments(cluster, topic, {0: [1, 2, 3], 1: [3, 2, 1]})
        assert codes == {0: 0, 1: 0}
        ongoing = list_reassignments(cluster)
        assert ongoing[(topic, 0)] == ([1, 2, 3, 0], [3], [0])
        assert ongoing[(topic, 1)] == ([3, 2, 1, 0], [3], [0])
        # Cancel partition 1 (null target): back to its original replica set.
        assert alter_reassignments(cluster, topic, {1: None}) == {1: 0}
        ongoing = list_reassignments(cluster)
        assert (topic, 1) not in ongoing and (topic, 0) in ongoing
        # Cancelling what is not moving is refused as Kafka does.
        assert alter_reassignments(cluster, topic, {1: None}) == {1: 85}
    finally:
        thaw(cluster, adding)
    cluster.wait_until(
        lambda: (
            replicas_of(cluster, topic) == {0: [1, 2, 3], 1: [2, 1, 0]}
            and not list_reassignments(cluster)
        ),
        "partition 0 to complete and partition 1 to stay reverted",
        timeout=40,
    )
    cluster.wait_until(
        lambda: not partition_dir(cluster, 3, topic, 1).exists(),
        "broker 3 to drop the cancelled replica",
        timeout=20,
    )


def test_elect_preferred_leader_after_a_bounce(cluster: ProcessCluster) -> None:
    topic = "elected"
    victim = 2 if controller_id(cluster) != 2 else 1
    create_topic(cluster, topic, [[victim, 0, 3]])
    assert cluster.leader_of(topic, 0) == victim
    cluster.brokers[victim].stop()
    cluster.wait_until(lambda: cluster.leader_of(topic, 0) == 0, "leadership to move to 0")
    cluster.brokers[victim].start(timeout=60)
    cluster.wait_for_full_isr(topic, 1, 3, timeout=40)
    assert cluster.leader_of(topic, 0) == 0  # nothing moves it back on its own here
    # ElectLeaders answers once the broker that handled it (the controller) shows the new
    # leader, as Kafka's DelayedElectLeader: its Metadata right after says so, no waiting.
    controller = cluster.brokers[controller_id(cluster)]
    client = RawClient(controller.port)
    try:
        answer = client.call(
            request(
                43,
                2,
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": topic, "partitions": [0]}],
                    "timeout": 30_000,
                },
            )
        )
        assert answer.error_code == 0
        assert [p.error_code for p in answer.replica_election_results[0].partition_result] == [0]
        metadata = client.call(
            request(
                3,
                12,
                {
                    "topics": [{"topic_id": None, "name": topic}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
        )
        assert metadata.topics[0].partitions[0].leader_id == victim
    finally:
        client.close()
    tp = TopicPartition(topic, 0)
    admin = cluster.admin()
    # A second election is not needed (ELECTION_NOT_NEEDED is reported, as by Kafka).
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert again[tp] is not None and again[tp].code() == 84


def test_controller_failover_in_the_middle_of_a_reassignment(cluster: ProcessCluster) -> None:
    topic = "failover"
    old_controller = controller_id(cluster)
    adding = next(b for b in (3, 2, 1, 0) if b != old_controller)
    origin = [b for b in range(4) if b != adding]
    target = [b for b in origin if b != old_controller] + [adding]
    create_topic(cluster, topic, [origin])
    freeze(cluster, adding)
    try:
        assert alter_reassignments(cluster, topic, {0: target}) == {0: 0}
        cluster.brokers[old_controller].kill()  # mid-reassignment, hard
        cluster.wait_until(
            lambda: controller_id(cluster) not in (old_controller, adding),
            "a new controller",
            timeout=20,
        )
    finally:
        thaw(cluster, adding)
    # The new controller resumes from the topic znode and completes it.
    cluster.wait_until(
        lambda: replicas_of(cluster, topic) == {0: target} and not list_reassignments(cluster),
        "the new controller to complete the reassignment",
        timeout=40,
    )
    cluster.wait_for_full_isr(topic, 1, 3, timeout=30)
    assert cluster.leader_of(topic, 0) in target


def test_auto_leader_rebalance(tmp_path: Path, zk_connect: str) -> None:
    """leader.imbalance.check.interval.seconds=1: after a bounce the preferred leader gets
    its partitions back without being asked (Kafka's checkAndTriggerAutoLeaderRebalance)."""
    c = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {
            "offsets.topic.replication.factor": "1",
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "1",
        },
    ).start()
    try:
        topic = "rebalanced"
        victim = next(b for b in (2, 1) if b != controller_id(c))
        others = [b for b in range(3) if b != victim]
        create_topic(c, topic, [[victim, *others], [victim, *reversed(others)]])
        c.brokers[victim].stop()
        c.wait_until(
            lambda: all(m.leader in others for m in c.partitions(topic).values()),
            "leadership to move away",
        )
        c.brokers[victim].start(timeout=60)
        c.wait_until(
            lambda: all(m.leader == victim for m in c.partitions(topic).values()),
            "the rebalance to give the preferred leader its partitions back",
            timeout=40,
        )
    finally:
        c.kill()
