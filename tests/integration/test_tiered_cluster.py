"""Tiered storage in a replicated cluster: only the leader uploads; after a leader failover
mid-offload the new leader goes on from the manifest (nothing uploaded twice, nothing
missing); followers follow the manifest and keep their local disk bounded."""

from __future__ import annotations

import itertools
import re
import shutil
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.files import present_bytes
from tests.integration.cluster_harness import ProcessCluster
from tierlog.records.producer_snapshot import decode_snapshot
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind
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
    return present_bytes(directory.glob("*.log"))


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


def test_a_wiped_follower_restarts_at_the_leaders_local_start_with_remote_state(
    tmp_path: Path, zk_connect: str
) -> None:
    """KIP-405: a replica that has nothing is told OFFSET_MOVED_TO_TIERED_STORAGE, takes
    the leader-epoch history and producer snapshot uploaded beside the remote segment
    ending at the leader's local log start, and copies only the local tail. As leader
    later, it serves the whole log (remote + local) once."""
    topic = "tiered-bootstrap"
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        2,
        {
            "remote.log.manager.task.interval.ms": "300",
            "log.retention.check.interval.ms": "300",
            "log.segment.delete.delay.ms": "0",
        },
    ).start()
    try:
        admin = cluster.admin()  # kept: its futures fail once it is collected
        admin.create_topics(
            [
                NewTopic(
                    topic,
                    1,
                    replica_assignment=[[0, 1]],
                    config={
                        "remote.storage.enable": "true",
                        "segment.bytes": str(SEGMENT),
                        "local.retention.bytes": str(LOCAL_RETENTION),
                    },
                )
            ]
        )[topic].result(30)
        cluster.wait_for_full_isr(topic, 1, 2)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 16384,
            }
        )
        for n in range(1500):
            producer.produce(topic, (b"%d" % n).ljust(1000), partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0
        leader_dir = cluster.brokers[0].data_dir / f"{topic}-0"

        def leader_local_start() -> int:
            return min(int(p.stem) for p in leader_dir.glob("*.log"))

        cluster.wait_until(lambda: leader_local_start() > 0, "the leader to trim its local log")

        # Broker 1 loses its copy: stopped, its partition directory deleted, started again.
        follower = cluster.brokers[1]
        follower.stop()
        shutil.rmtree(follower.data_dir / f"{topic}-0")
        start = leader_local_start()
        follower.start(timeout=60)
        cluster.wait_for_full_isr(topic, 1, 2, timeout=60)

        follower_dir = follower.data_dir / f"{topic}-0"
        assert "(the leader's local log starts at" in follower.log_text()
        # It copied no remote data: its log starts at or after the leader's local start
        # (which local retention may have moved on since).
        follower_start = min(int(p.stem) for p in follower_dir.glob("*.log"))
        assert follower_start >= start > 0
        store = FsspecRemoteStore((tmp_path / "remote").as_uri())
        manifest = store.read_manifest(topic, 0)
        # It took the epoch history and the producer snapshot from the remote tier (the
        # epochs below its log start are then answered from the manifest, see
        # tests/remote/test_unified_log.py).
        restarts = re.findall(
            r"restarting at (\d+) \(the leader's local log starts at \d+\) with the state of "
            r"remote segment \d+-\d+ \((\d+) leader epochs, a producer snapshot\)",
            follower.log_text(),
        )
        assert restarts, follower.log_text()[-3000:]
        restart, epochs = int(restarts[-1][0]), int(restarts[-1][1])
        assert restart >= start and epochs == 1
        below = mf.segment_for_offset(manifest, restart - 1)
        assert below is not None and below.has_aux_state and below.end_offset == restart - 1
        uploaded = store.fetch_index(below, IndexKind.PRODUCER_SNAPSHOT)
        entries = decode_snapshot(uploaded)
        assert len(entries) == 1 and entries[0].last_sequence >= 0
        own = follower_dir / f"{restart:020d}.snapshot"
        assert not own.exists() or own.read_bytes() == uploaded  # retention may delete it

        # The former follower leads: every record, from both tiers, exactly once.
        cluster.brokers[0].kill()
        cluster.wait_until(lambda: cluster.leader_of(topic, 0) == 1, "broker 1 to lead")
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "check",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[int] = []
        deadline = time.monotonic() + 60
        try:
            while len(seen) < 1500 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    seen.append(int(msg.value()))
        finally:
            consumer.close()
        assert seen == list(range(1500))
    finally:
        cluster.kill()
