"""``tierlog topics describe`` of a compacted topic in a 3-broker cluster: each broker
reports ``tierlog.log.cleaner.state`` only for the partitions it leads (followers clean
their own copies too), and describe shows every partition's last clean, asked of the
partition's leader."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.tools.cli import Cli
from tierlog.tools.cleaner_report import broker_states

TOPIC = "changelog"
LAST_CLEAN = re.compile(r"\tCleaner: dirty ratio \d\.\d\d, last clean \d+ s ago \(")


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3, {"log.cleaner.backoff.ms": "100"}).start()
    try:
        yield c
    finally:
        c.kill()


@pytest.mark.timeout(180)
def test_each_partition_shows_its_leaders_cleaning(cluster: ProcessCluster) -> None:
    configs = {"cleanup.policy": "compact", "segment.bytes": "16384",
               "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
    admin = cluster.admin()  # kept while its future is pending
    admin.create_topics([NewTopic(TOPIC, 3, 3, config=configs)])[TOPIC].result(timeout=30)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "batch.size": 4096, "acks": "all"}
    )
    for i in range(6000):
        producer.produce(TOPIC, key=b"user-%d" % (i % 60), value=b"x" * 40, partition=i % 3)
        producer.poll(0)
    assert producer.flush(60) == 0

    cli = Cli(cluster.bootstrap)
    deadline = time.monotonic() + 90
    while True:
        described = cli.ok("topics", "describe", TOPIC)
        rows = [line for line in described.splitlines() if line.startswith(f"\tTopic: {TOPIC}\t")]
        if all(LAST_CLEAN.search(row) for row in rows) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(rows) == 3 and all(LAST_CLEAN.search(row) for row in rows), described

    leaders = {p: info.leader for p, info in cluster.partitions(TOPIC).items()}
    addresses = {}
    for broker in cluster.brokers:
        host, port = broker.bootstrap.rsplit(":", 1)
        broker_id = int(broker.overrides["broker.id"])
        addresses[broker_id] = (host, int(port))
    states = broker_states(addresses, timeout=10)
    assert set(states) == {0, 1, 2}
    for broker_id, state in states.items():
        assert state is not None
        led = {p for (topic, p) in state if topic == TOPIC}
        assert led == {p for p, leader in leaders.items() if leader == broker_id}
