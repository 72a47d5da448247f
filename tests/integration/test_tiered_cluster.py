"""Tiered storage in a replicated cluster: only the leader uploads; after a leader failover
mid-offload the new leader goes on from the manifest (nothing uploaded twice, nothing
missing); followers follow the manifest and keep their local disk bounded."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tierlog.remote import manifest as mf
from tierlog.remote.fsspec_storage import FsspecRemoteStore

TOPIC = "tiered-replicated"
SEGMENT = 64 * 1024
LOCAL_RETENTION = 4 * SEGMENT


def produce(cluster: ProcessCluster, start: int, count: int) -> None:
    producer = Producer(
        # batch.size: batches must fit the topic's small segments.
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384}
    )
    errors: list[object] = []
    for n in range(start, start + count):
        producer.produce(
            TOPIC,
            (b"%d" % n).ljust(1000),  # int() reads it back
            partition=0,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def consume_all(cluster: ProcessCluster, count: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(int(msg.value()))
    finally:
        consumer.close()
    return seen


def local_bytes(cluster: ProcessCluster, broker: int) -> int:
    directory = cluster.brokers[broker].data_dir / f"{TOPIC}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_leader_failover_mid_offload(tmp_path: Path, zk_connect: str) -> None:
    remote_root = (tmp_path / "remote").as_uri()
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        3,
        {
            "remote.log.storage.url": remote_root,
            "remote.log.manager.task.interval.ms": "300",
            "log.retention.check.interval.ms": "300",
            "log.segment.delete.delay.ms": "0",
        },
    ).start()
    try:
        admin = cluster.admin()
        admin.create_topics(
            [
                NewTopic(
                    TOPIC,
                    1,
                    3,
                    config={
                        "remote.storage.enable": "true",
                        "segment.bytes": str(SEGMENT),
                        "local.retention.bytes": str(LOCAL_RETENTION),
                        "min.insync.replicas": "2",
                    },
                )
            ]
        )[TOPIC].result(30)
        cluster.wait_for_full_isr(TOPIC, 1, 3)
        store = FsspecRemoteStore(remote_root)

        def committed() -> list[tuple[int, int]]:
            manifest = store.read_manifest(TOPIC, 0)
            return [(s.base_offset, s.end_offset) for s in mf.committed_segments(manifest)]

        produce(cluster, 0, 1500)
        cluster.wait_until(lambda: len(committed()) >= 5, "the first uploads", 60)
        first_leader = cluster.leader_of(TOPIC, 0)
        cluster.brokers[first_leader].kill()
        cluster.wait_until(
            lambda: cluster.leader_of(TOPIC, 0) not in (-1, first_leader), "a new leader"
        )
        produce(cluster, 1500, 1500)
        cluster.wait_until(lambda: len(committed()) >= 30, "uploads by the new leader", 60)

        segments = committed()
        # Contiguous, no overlap: nothing uploaded twice, nothing skipped.
        for (_, end), (base, _) in itertools.pairwise(segments):
            assert base == end + 1, segments
        assert segments[0][0] == 0
        # Followers trimmed their local copies to what the manifest covers.
        followers = [b for b in range(3) if b not in (first_leader, cluster.leader_of(TOPIC, 0))]
        for follower in followers:
            cluster.wait_until(
                lambda f=follower: local_bytes(cluster, f) <= LOCAL_RETENTION + 3 * SEGMENT,
                f"broker {follower}'s local disk to stay bounded",
                30,
            )
        seen = consume_all(cluster, 3000)
        assert set(range(3000)) <= set(seen) and len(seen) == len(set(seen))
    finally:
        cluster.kill()
