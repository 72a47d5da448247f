"""Transactions on a real 3-broker cluster (ZooKeeper, replicated ``__transaction_state``):
the coordinator broker SIGKILLed mid-commit, and a producer fenced across a coordinator
failover. Every transaction must end wholly committed or wholly aborted on every partition,
and no partition may be left with an open transaction (its LSO stuck)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tierlog.broker.group.placement import partition_for

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
