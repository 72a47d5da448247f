"""Transactions on a real cluster (ZooKeeper, replicated ``__transaction_state``, broker
processes, librdkafka): the coordinator broker SIGKILLed mid-commit, where every
transaction must end wholly committed or wholly aborted on every partition and no partition
may be left with an open transaction (its LSO stuck); a producer fenced across a
coordinator failover; and a follower serving read_committed fetches (KIP-392), which must
hold its last stable offset until a marker is below its high watermark."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, fetch_body, request
from tierlog.broker.group.placement import partition_for
from tierlog.protocol import ApiKey
from tierlog.records.header import iter_batches

TOPIC = "ledger"
PARTITIONS = 3
TXN_PARTITIONS = 3
PER_ROUND = 30
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, TXN_OVERRIDES).start()
    try:
        admin = c.admin()
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        c.wait_for_full_isr(TOPIC, PARTITIONS, 3)
        yield c
    finally:
        c.kill()


def producer_for(cluster: ProcessCluster, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 20000,
            "linger.ms": 5,
            "log_level": 2,
        }
    )
    producer.init_transactions(60)
    return producer


def coordinator_of(cluster: ProcessCluster, transactional_id: str) -> int:
    return cluster.leader_of("__transaction_state", partition_for(transactional_id, TXN_PARTITIONS))


def read_committed(cluster: ProcessCluster, settle_s: float = 3.0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "auditor",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 2,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline and time.monotonic() - quiet_since < settle_s:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return values


def no_open_transactions(cluster: ProcessCluster) -> bool:
    """Every partition's LSO has reached its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "lso",
            "isolation.level": "read_committed",
            "log_level": 2,
        }
    )
    # librdkafka's default is read_committed: the high watermark needs read_uncommitted.
    plain = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "hw",
            "isolation.level": "read_uncommitted",
            "log_level": 2,
        }
    )
    try:
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            lso = consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            hw = plain.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            if lso != hw:
                return False
        return True
    finally:
        consumer.close()
        plain.close()


def commit_into(producer: Producer, outcome: list[BaseException | None]) -> None:
    try:
        producer.commit_transaction(60)
        outcome.append(None)
    except KafkaException as exc:
        outcome.append(exc)


def test_the_coordinator_killed_mid_commit_leaves_no_half_transaction(
    cluster: ProcessCluster,
) -> None:
    producer = producer_for(cluster, "ledger-writer")
    acknowledged: set[int] = set()
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(PER_ROUND):
            producer.produce(TOPIC, b"r%d-%03d" % (round_, i), partition=i % PARTITIONS)
        producer.flush(30)
        victim = coordinator_of(cluster, "ledger-writer")
        outcome: list[BaseException | None] = []
        committer = threading.Thread(target=commit_into, args=(producer, outcome))
        committer.start()
        # Round 0: kill as the commit goes out (the prepare may or may not be durable);
        # later rounds: right after the commit is acknowledged, while markers are in flight.
        if round_ > 0:
            committer.join(60)
        cluster.brokers[victim].kill()
        committer.join(90)
        assert outcome, "commit_transaction did not return"
        if outcome[0] is None:
            acknowledged.add(round_)
        elif isinstance(outcome[0], KafkaException) and outcome[0].args[0].txn_requires_abort():
            producer.abort_transaction(60)
        cluster.wait_until(
            lambda victim=victim: coordinator_of(cluster, "ledger-writer") != victim,
            "a new transaction coordinator",
            timeout=60,
        )
        cluster.brokers[victim].start(timeout=60)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
    assert acknowledged >= {1, 2}
    cluster.wait_until(lambda: no_open_transactions(cluster), "every LSO at its HW", timeout=60)
    per_round = Counter(value.split(b"-")[0] for value in read_committed(cluster))
    for round_ in range(3):
        count = per_round.get(b"r%d" % round_, 0)
        assert count in (0, PER_ROUND), f"round {round_}: {count} of {PER_ROUND} visible"
        if round_ in acknowledged:
            assert count == PER_ROUND, f"round {round_} was acknowledged but is not visible"


def test_a_producer_is_fenced_across_a_coordinator_failover(cluster: ProcessCluster) -> None:
    """The old instance's transaction was open when its coordinator died; the new instance
    initialises on the new coordinator (which loaded the id from the replicated
    ``__transaction_state``, aborted the open transaction and bumped the epoch), and the
    old instance's commit there is refused as fenced."""
    zombie = producer_for(cluster, "failover-writer")
    zombie.begin_transaction()
    for p in range(PARTITIONS):
        zombie.produce(TOPIC, b"zombie-%d" % p, partition=p)
    zombie.flush(30)
    victim = coordinator_of(cluster, "failover-writer")
    cluster.brokers[victim].kill()
    cluster.wait_until(
        lambda: coordinator_of(cluster, "failover-writer") not in (victim, -1),
        "a new transaction coordinator",
        timeout=60,
    )
    successor = producer_for(cluster, "failover-writer")
    successor.begin_transaction()
    for p in range(PARTITIONS):
        successor.produce(TOPIC, b"successor-%d" % p, partition=p)
    successor.commit_transaction(60)
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(60)
    error = caught.value.args[0]
    assert (error.code(), error.fatal()) == (KafkaError._FENCED, True), error
    assert "end transaction" in str(error), error  # EndTxn's PRODUCER_FENCED
    assert sorted(read_committed(cluster)) == [b"successor-%d" % p for p in range(PARTITIONS)]


# A follower's fetch long poll: long enough that its high watermark stays behind a marker
# it already has for seconds (it learns the leader's next one only in its next answer).
SLOW_FOLLOWER_WAIT_MS = "10000"


def follower_txn_start(client: RawClient, topic: str) -> int:
    """The producer's open-transaction start in the follower's own producer state
    (DescribeProducers answered by that replica), -1 once the marker is there."""
    answer = client.call(
        request(
            ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}
        )
    )
    (p,) = answer.topics[0].partitions
    assert int(p.error_code) == 0, p
    (producer,) = p.active_producers
    return int(producer.current_txn_start_offset)


def read_committed_from(client: RawClient, topic: str) -> tuple[int, int, list[int]]:
    """(high watermark, LSO, offsets returned) of a read_committed Fetch v12 from offset 0
    sent to this broker (KIP-392: followers serve v11+)."""
    body = {**fetch_body(topic, {0: 0}), "isolation_level": 1}
    answer = client.call(request(ApiKey.FETCH, 12, body))
    (p,) = answer.responses[0].partitions
    assert int(p.error_code) == 0, p
    offsets = [
        h.base_offset + n
        for _, h in iter_batches(p.records or b"")
        if not h.is_control
        for n in range(h.last_offset_delta + 1)
    ]
    return int(p.high_watermark), int(p.last_stable_offset), offsets


@pytest.mark.timeout(120)
def test_a_follower_serves_a_transaction_only_once_its_marker_is_committed(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(
        tmp_path, zk_connect, 2, {"replica.fetch.wait.max.ms": SLOW_FOLLOWER_WAIT_MS}
    ).start()
    follower = RawClient(cluster.brokers[1].port)
    try:
        new = NewTopic("near", num_partitions=1, replica_assignment=[[0, 1]])
        admin = cluster.admin()
        admin.create_topics([new])["near"].result(30)
        cluster.wait_for_full_isr("near", 1, 2)
        producer = producer_for(cluster, "near-writer")
        producer.begin_transaction()
        for i in range(5):
            producer.produce("near", b"v%d" % i, partition=0)  # 0-4
        producer.commit_transaction(30)  # the marker at 5
        cluster.wait_until(
            lambda: follower_txn_start(follower, "near") == -1, "the marker on the follower"
        )
        # The follower has the marker, but its high watermark (what the leader told it
        # in its last answer) is still below it: a new leader might lack the marker, so
        # the transaction is still unstable here (Kafka's rule on every replica).
        high_watermark, lso, offsets = read_committed_from(follower, "near")
        assert high_watermark == 5, "the window under test has passed; slower long poll?"
        assert (lso, offsets) == (0, [])
        cluster.wait_until(
            lambda: read_committed_from(follower, "near")[0] == 6, "the follower's HW", timeout=30
        )
        assert read_committed_from(follower, "near") == (6, 6, [0, 1, 2, 3, 4])
    finally:
        follower.close()
        cluster.kill()
