"""Compaction in a replicated cluster: every replica cleans its own log (as in Kafka), and
the replicas end up with the same retained records; a consumer reads every key's last
value from the leader, and from the new leader after the old one is stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.compacted_topics import assert_compacted, produce_changes, read_with_librdkafka
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
    last = produce_changes(
        cluster.bootstrap,
        TOPIC,
        MESSAGES,
        lambda i: (b"k%d" % (i % KEYS), None if i % 89 == 0 else b"v%d" % i),
        acks="all",
    )
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

    def cleaned_past_half(data_dir: Path) -> bool:
        checkpoint = data_dir / "cleaner-offset-checkpoint"
        return checkpoint.exists() and first_dirty(data_dir) > MESSAGES / 2

    # A replica may have cleaned first while the changes were still arriving (a slow,
    # loaded machine); the cleaner runs again (dirty ratio 0.01), so wait for that pass.
    cluster.wait_until(
        lambda: all(cleaned_past_half(b.data_dir) for b in cluster.brokers),
        "every replica's cleaner past half of the changes",
        timeout=90,
    )
    below = min(first_dirty(b.data_dir) for b in cluster.brokers)
    assert below > MESSAGES / 2
    retained = [_retained(d, below) for d in dirs]
    assert retained[0] == retained[1] == retained[2]
    assert len(retained[0]) < below / 4, "superseded records are gone on every replica"
    assert_compacted(read_with_librdkafka(cluster.bootstrap, TOPIC), last, at_most=MESSAGES)

    leader = cluster.leader_of(TOPIC, 0)
    cluster.brokers[leader].stop()
    cluster.wait_until(lambda: cluster.leader_of(TOPIC, 0) not in (-1, leader), "a new leader")
    live = next(b for n, b in enumerate(cluster.brokers) if n != leader)
    assert_compacted(read_with_librdkafka(live.bootstrap, TOPIC), last, at_most=MESSAGES)
