"""Compaction in a replicated cluster: every replica cleans its own log (as in Kafka), and
the replicas end up with the same retained records; a consumer reads every key's last
value from the leader, and from the new leader after the old one is stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tierlog.records.header import iter_batches
from tierlog.records.reader import iter_records

TOPIC = "changelog"
KEYS = 50
MESSAGES = 3000


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, {"log.cleaner.backoff.ms": "100"}).start()
    try:
        yield c
    finally:
        c.kill()


def _retained(directory: Path, below: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """Records below ``below`` in a replica's segment files."""
    out = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for position, header in iter_batches(data):
            for r in iter_records(data[position : position + header.size]):
                if r.offset < below:
                    out.append((r.offset, r.key, r.value))
    return out


def _read_all(bootstrap: str) -> dict[bytes, tuple[int, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    _, end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None or message.error() is not None:
            continue
        latest[message.key()] = (message.offset(), message.value())
        if message.offset() >= end - 1:
            break
    consumer.close()
    return latest


@pytest.mark.timeout(240)
def test_replicas_clean_their_own_logs_to_the_same_records(cluster: ProcessCluster) -> None:
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.01",
        "min.insync.replicas": "2",
    }
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=config)])[TOPIC].result(30)
    cluster.wait_for_full_isr(TOPIC, 1, 3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "batch.size": 4096,
        }
    )
    last: dict[bytes, tuple[int, bytes | None]] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        last[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(MESSAGES):
        value = None if i % 89 == 0 else b"v%d" % i
        producer.produce(TOPIC, key=b"k%d" % (i % KEYS), value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    cluster.wait_until(
        lambda: all("changelog-0 cleaned" in b.log_text() for b in cluster.brokers),
        "every replica to clean its log",
        timeout=60,
    )
    dirs = [b.data_dir / f"{TOPIC}-0" for b in cluster.brokers]

    # Compare below the lowest first dirty offset: the part every replica has cleaned.
    def first_dirty(data_dir: Path) -> int:
        lines = (data_dir / "cleaner-offset-checkpoint").read_text().split("\n")[2:]
        return next(int(line.split()[2]) for line in lines if line.startswith(f"{TOPIC} 0 "))

    cluster.wait_until(
        lambda: all((b.data_dir / "cleaner-offset-checkpoint").exists() for b in cluster.brokers),
        "every replica's cleaner checkpoint",
    )
    below = min(first_dirty(b.data_dir) for b in cluster.brokers)
    assert below > MESSAGES / 2
    retained = [_retained(d, below) for d in dirs]
    assert retained[0] == retained[1] == retained[2]
    assert len(retained[0]) < below / 4, "superseded records are gone on every replica"
    assert _read_all(cluster.bootstrap) == last

    leader = cluster.leader_of(TOPIC, 0)
    cluster.brokers[leader].stop()
    cluster.wait_until(lambda: cluster.leader_of(TOPIC, 0) not in (-1, leader), "a new leader")
    live = next(b for n, b in enumerate(cluster.brokers) if n != leader)
    assert _read_all(live.bootstrap) == last
