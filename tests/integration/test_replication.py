"""Kafka's replication system test, reproduced (tests/kafkatest/tests/core/replication_test.py):
3 brokers, a topic with 3 partitions, RF 3, min.insync.replicas 2, an idempotent acks=all
producer and a group consumer running throughout; failures against the leader of partition
0 and, separately, against the controller: clean shutdown, hard kill (SIGKILL), clean
bounces and hard bounces.

What is asserted, per partition:
- the log (read whole at the end) holds every acknowledged record, each once (idempotence
  leaves no duplicate in the log), in the order they were sent;
- the live consumer received every acknowledged record, each offset only with the value
  the log keeps there (it never saw a record a failover later truncated), and in offset
  order; it may receive an offset again after a rebalance (at least once: it resumes at its
  last committed offset), never skip one.

Kafka's five bounces per case; each round is short (2 s ZooKeeper sessions, 100 more
acknowledged records while the victim is down) so the whole matrix runs in CI.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.acked_producer import PARTITIONS, TOPIC, BackgroundProducer
from tests.integration.cluster_harness import ProcessCluster

# Kafka's test bounces 5 times, and so does CI; TIERLOG_BOUNCES=N runs another count.
BOUNCES = int(os.environ.get("TIERLOG_BOUNCES", "5"))
# A case is 30-50 s alone (five restarts of a broker process, the ISR filling again after
# each); a loaded 2-core run of the whole suite takes it past the default 120 s hang guard.
pytestmark = pytest.mark.timeout(360)


class LiveConsumer:
    """A group member subscribed to the topic from before the first failure to the end (as
    the console consumer of Kafka's test): remembers every (offset, value) delivered, per
    partition, in delivery order. Commits automatically, so a rebalance or a coordinator
    failover re-delivers at most what followed its last commit."""

    def __init__(self, bootstrap: str, topic: str = TOPIC) -> None:
        self.delivered: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        self._topic = topic
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "live",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 1000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._consumer.subscribe([self._topic])
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is not None and not msg.error():
                self.delivered[msg.partition()].append((msg.offset(), int(msg.value())))

    def __enter__(self) -> LiveConsumer:
        self._thread.start()
        return self

    def values(self, partition: int) -> set[int]:
        return {value for _, value in list(self.delivered[partition])}

    def wait_for(self, acked: dict[int, list[int]], timeout: float = 60) -> None:
        """Wait until every record in ``acked`` was delivered (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(set(acked[p]) <= self.values(p) for p in acked):
                return
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def read_log(cluster: ProcessCluster, topic: str = TOPIC) -> dict[int, list[tuple[int, int]]]:
    """Each partition's whole log as (offset, value), from offset 0 to its high watermark
    (nothing has been deleted in these tests, so the log starts at 0)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    log: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while any(len(log[p]) < ends[p] for p in log) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                log[msg.partition()].append((msg.offset(), int(msg.value())))
    finally:
        consumer.close()
    return log


def check_log_and_live_consumer(
    acked: dict[int, list[int]],
    log: dict[int, list[tuple[int, int]]],
    delivered: dict[int, list[tuple[int, int]]],
) -> None:
    """The assertions of the module docstring, partition by partition."""
    for p in acked:
        offsets = [offset for offset, _ in log[p]]
        values = [value for _, value in log[p]]
        assert offsets == list(range(len(offsets))), f"partition {p}: the log has holes"
        lost = set(acked[p]) - set(values)
        assert not lost, f"partition {p}: {len(lost)} acknowledged records not in the log"
        assert len(values) == len(set(values)), f"partition {p}: duplicates in the log"
        assert values == sorted(values), f"partition {p}: the log is out of order"
        kept = dict(log[p])
        wrong = [(o, v) for o, v in delivered[p] if kept.get(o) != v]
        assert not wrong, (
            f"partition {p}: the live consumer read records the log does not keep "
            f"(offset, value): {wrong[:5]}"
        )
        unseen = set(acked[p]) - {v for _, v in delivered[p]}
        assert not unseen, f"partition {p}: the live consumer missed {len(unseen)} records"
        # Offsets go up one by one; a step back is a re-delivery (at least once), a step
        # forward past the next offset would skip records.
        seen = [o for o, _ in delivered[p]]
        skips = [(a, b) for a, b in itertools.pairwise(seen) if b > a + 1]
        assert not skips, f"partition {p}: the live consumer skipped offsets {skips[:5]}"
        assert seen[0] == 0, f"partition {p}: the live consumer started at {seen[0]}"


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
    with LiveConsumer(cluster.bootstrap) as live:
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
        live.wait_for(producer.acked)
    check_log_and_live_consumer(producer.acked, read_log(cluster), live.delivered)
