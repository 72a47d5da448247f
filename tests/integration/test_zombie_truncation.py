"""A zombie leader's divergent tail is truncated (issue 9, "Zombie leader"; KIP-101/KIP-279).

The leader of partition 0 takes records its followers never fetch (they are paused a moment,
longer than a fetch's long poll, then an acks=1 write goes to the leader alone), and is then
paused (SIGSTOP) past its ZooKeeper session while an acks=all producer keeps writing. A
follower is elected and takes other records at the same offsets. Resumed, the old leader
must find it was deposed, truncate what only it held (OffsetForLeaderEpoch, never by high
watermark alone) and follow: at the end its log is the new leader's, batch for batch and
byte for byte, without the part of the tail the new leader did not have (all of it, unless
a late fetch answer gave a follower some), and no acknowledged acks=all record is lost.

(tests/integration/test_failures.py has the zombie test of the issue's list; this one makes
the divergence certain and compares the replicas' logs on disk.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.integration.acked_producer import PARTITIONS, TOPIC, BackgroundProducer
from tests.integration.cluster_harness import ProcessCluster, signal_broker
from tests.integration.test_replication import read_log
from tierlog.records.reader import iter_batches_records

# The zombie's own writes, per attempt: values no BackgroundProducer sends (it counts up
# from 0).
TAIL_SIZE = 3
ATTEMPTS = 3
# Longer than the followers' long poll (replica.fetch.wait.max.ms, 100 ms in the harness),
# so a fetch they had parked on the leader is usually answered before the tail is written.
# Only usually: a loaded leader may answer it late, with the tail, into the paused
# follower's socket; ``diverge`` checks what the successor holds instead of relying on it.
FETCH_SETTLE_S = 0.4


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


def write_tail_to_the_leader_alone(
    cluster: ProcessCluster, leader: int, tail: list[int]
) -> dict[int, int]:
    """Pause the followers, write ``tail`` with acks=1 (answered after the leader's own
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

        for value in tail:
            producer.produce(TOPIC, b"%d" % value, partition=0, on_delivery=on_delivery)
        assert producer.flush(5) == 0
        # The leader goes before its followers wake: nothing it holds past their logs can
        # reach them now.
        signal_broker(cluster, leader, signal.SIGSTOP)
    finally:
        for b in followers:
            signal_broker(cluster, b, signal.SIGCONT)
    assert sorted(acked.values()) == sorted(tail), acked
    return acked


def diverge(cluster: ProcessCluster) -> tuple[int, int, dict[int, int]]:
    """Make the leader of partition 0 a frozen zombie holding records its elected successor
    does not: returns the zombie, the successor and offset -> value of those records.

    A follower may still get the tail, from a fetch the leader had parked and answered into
    its socket while it was paused; what the successor holds is then legitimately kept, and
    only the rest diverges. When the successor got all of it nothing diverges, so the zombie
    is resumed and the next leader tried, with new values.
    """
    for attempt in range(ATTEMPTS):
        zombie = cluster.leader_of(TOPIC, 0)
        values = [-(attempt * TAIL_SIZE + i + 1) for i in range(TAIL_SIZE)]
        tail = write_tail_to_the_leader_alone(cluster, zombie, values)
        # Frozen, its files hold the tail.
        frozen = values_at(replica_log(cluster, zombie))
        assert all(frozen.get(o) == v for o, v in tail.items()), "the tail is not on disk"
        cluster.wait_until(
            lambda z=zombie: cluster.leader_of(TOPIC, 0) not in (-1, z), "a new leader", 30
        )
        successor = cluster.leader_of(TOPIC, 0)
        # Elected seconds after its resume: a late answer in its socket was appended then.
        held = values_at(replica_log(cluster, successor))
        divergent = {o: v for o, v in tail.items() if held.get(o) != v}
        if divergent:
            return zombie, successor, divergent
        signal_broker(cluster, zombie, signal.SIGCONT)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
    pytest.fail(f"the successor held the whole tail {ATTEMPTS} times: nothing diverged")


def test_a_zombie_leader_truncates_its_divergent_tail_and_rejoins(cluster: ProcessCluster) -> None:
    with BackgroundProducer(
        cluster.bootstrap, **{"request.timeout.ms": 3000, "message.timeout.ms": 60_000}
    ) as producer:
        producer.wait_for_more(300)
        zombie, successor, divergent = diverge(cluster)
        producer.wait_for_more(300)  # the new leader writes over the divergent offsets
        signal_broker(cluster, zombie, signal.SIGCONT)
        cluster.wait_for_full_isr(TOPIC, PARTITIONS, 3, timeout=60)
        producer.wait_for_more(300)
    assert not producer.errors, producer.errors[:3]

    def same_logs() -> bool:
        return replica_log(cluster, zombie) == replica_log(cluster, successor) != []

    cluster.wait_until(same_logs, "the old leader's log to equal the new leader's", 30)
    kept = values_at(replica_log(cluster, zombie))
    # Every divergent offset now holds the new leader's record, not the zombie's.
    assert all(kept.get(o, -1) >= 0 for o in divergent), {o: kept.get(o) for o in divergent}
    assert not set(divergent.values()) & set(kept.values()), "the zombie's tail survived"
    # The third replica agrees, and what consumers read is that log, complete.
    assert replica_log(cluster, 3 - zombie - successor) == replica_log(cluster, successor)
    log = read_log(cluster)
    assert dict(log[0]) == kept
    for p in range(PARTITIONS):
        lost = set(producer.acked[p]) - {v for _, v in log[p]}
        assert not lost, f"partition {p}: {len(lost)} acknowledged records lost"
