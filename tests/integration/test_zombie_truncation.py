"""A zombie leader's divergent tail is truncated (issue 9, "Zombie leader"; KIP-101/KIP-279).

The leader of partition 0 takes records its followers never fetch (they are paused a moment,
longer than a fetch's long poll, then an acks=1 write goes to the leader alone), and is then
paused (SIGSTOP) past its ZooKeeper session while an acks=all producer keeps writing. A
follower is elected and takes other records at the same offsets. Resumed, the old leader
must find it was deposed, truncate what only it held (OffsetForLeaderEpoch, never by high
watermark alone) and follow: at the end its log is the new leader's, batch for batch and
byte for byte, without the zombie's tail, and no acknowledged acks=all record is lost.

(tests/integration/test_failures.py has the zombie test of the issue's list; this one makes
the divergence certain and compares the replicas' logs on disk.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.integration.test_replication import PARTITIONS, TOPIC, BackgroundProducer, read_log
from tierlog.records.reader import iter_batches_records

# The zombie's own writes: values no BackgroundProducer sends (it counts up from 0).
TAIL = [-1, -2, -3]
# Longer than the followers' long poll (replica.fetch.wait.max.ms, 100 ms in the harness),
# so a fetch they had parked on the leader is answered before the tail is written.
FETCH_SETTLE_S = 0.4


def signal_broker(cluster: ProcessCluster, broker: int, sig: signal.Signals) -> None:
    proc = cluster.brokers[broker].proc
    assert proc is not None
    os.kill(proc.pid, sig)


def replica_log(cluster: ProcessCluster, broker: int, partition: int = 0) -> list[bytes]:
    """The partition's batches as ``broker`` holds them on disk, in offset order (a torn
    batch at the end of a file being written is left out)."""
    directory = cluster.brokers[broker].data_dir / f"{TOPIC}-{partition}"
    batches: list[bytes] = []
    for segment in sorted(directory.glob("*.log"), key=lambda f: int(f.stem)):
        data = segment.read_bytes()
        position = 0
        for header, _ in iter_batches_records(data):
            batches.append(data[position : position + header.size])
            position += header.size
    return batches


def values_at(batches: list[bytes]) -> dict[int, int]:
    """offset -> value of every record in ``batches``."""
    found: dict[int, int] = {}
    for batch in batches:
        for _, records in iter_batches_records(batch):
            for record in records:
                assert record.value is not None
                found[record.offset] = int(record.value)
    return found


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3).start()
    try:
        admin = c.admin()
        topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        c.wait_for_full_isr(TOPIC, PARTITIONS, 3)
        yield c
    finally:
        for n in range(3):
            if c.brokers[n].proc is not None:
                signal_broker(c, n, signal.SIGCONT)  # a stopped process ignores SIGKILL's wait
        c.kill()


def write_tail_to_the_leader_alone(cluster: ProcessCluster, leader: int) -> dict[int, int]:
    """Pause the followers, write ``TAIL`` with acks=1 (answered after the leader's own
    append), and return offset -> value as the leader acknowledged them."""
    followers = [b for b in range(3) if b != leader]
    for b in followers:
        signal_broker(cluster, b, signal.SIGSTOP)
    acked: dict[int, int] = {}
    try:
        time.sleep(FETCH_SETTLE_S)
        producer = Producer(
            {
                "bootstrap.servers": cluster.brokers[leader].bootstrap,
                "acks": 1,
                "enable.idempotence": False,
                "message.timeout.ms": 5000,
            }
        )

        def on_delivery(err: object, msg: object) -> None:
            assert err is None, err
            acked[msg.offset()] = int(msg.value())  # type: ignore[attr-defined]

        for value in TAIL:
            producer.produce(TOPIC, b"%d" % value, partition=0, on_delivery=on_delivery)
        assert producer.flush(5) == 0
        # The leader goes before its followers wake: nothing it holds past their logs can
        # reach them now.
        signal_broker(cluster, leader, signal.SIGSTOP)
    finally:
        for b in followers:
            signal_broker(cluster, b, signal.SIGCONT)
    assert sorted(acked.values()) == sorted(TAIL), acked
    return acked


def test_a_zombie_leader_truncates_its_divergent_tail_and_rejoins(cluster: ProcessCluster) -> None:
    with BackgroundProducer(
        cluster.bootstrap, **{"request.timeout.ms": 3000, "message.timeout.ms": 60_000}
    ) as producer:
        producer.wait_for_more(300)
        zombie = cluster.leader_of(TOPIC, 0)
        tail = write_tail_to_the_leader_alone(cluster, zombie)
        # Frozen, its files hold the tail (the test's premise: the logs diverge).
        frozen = values_at(replica_log(cluster, zombie))
        assert all(frozen.get(o) == v for o, v in tail.items()), "the tail is not on disk"
        cluster.wait_until(
            lambda: cluster.leader_of(TOPIC, 0) not in (-1, zombie), "a new leader", 30
        )
        successor = cluster.leader_of(TOPIC, 0)
        producer.wait_for_more(300)  # the new leader writes over the tail's offsets
        signal_broker(cluster, zombie, signal.SIGCONT)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]

    def same_logs() -> bool:
        return replica_log(cluster, zombie) == replica_log(cluster, successor) != []

    cluster.wait_until(same_logs, "the old leader's log to equal the new leader's", 30)
    kept = values_at(replica_log(cluster, zombie))
    # Every offset of the tail now holds the new leader's record, not the zombie's.
    assert all(kept.get(o) not in TAIL for o in tail), {o: kept.get(o) for o in tail}
    assert not set(TAIL) & set(kept.values()), "the zombie's tail survived"
    # The third replica agrees, and what consumers read is that log, complete.
    assert replica_log(cluster, 3 - zombie - successor) == replica_log(cluster, successor)
    log = read_log(cluster)
    assert dict(log[0]) == kept
    for p in range(PARTITIONS):
        lost = set(producer.acked[p]) - {v for _, v in log[p]}
        assert not lost, f"partition {p}: {len(lost)} acknowledged records lost"
