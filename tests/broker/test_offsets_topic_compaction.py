"""__consumer_offsets is compacted: after a million commits on a few groups its disk use,
and with it what a restart replays, stay bounded, and every group's last commit is kept."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from tierlog.records.header import iter_batches

from .harness import BrokerProcess

GROUPS = 4
PARTITIONS = 250
ROUNDS = 1000  # GROUPS * PARTITIONS * ROUNDS = 1,000,000 committed offsets
SEGMENT_BYTES = 1 << 20


def _records_on_disk(directory: Path) -> tuple[int, int]:
    """(bytes, records) of the partition's .log files."""
    size = records = 0
    for path in directory.glob("*.log"):
        data = path.read_bytes()
        size += len(data)
        records += sum(header.record_count for _, header in iter_batches(data))
    return size, records


@pytest.mark.timeout(300)
def test_a_million_commits_leave_a_bounded_offsets_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(
        data,
        {
            "log.cleaner.backoff.ms": "200",
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
        },
    ).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])
        admin.close()
        consumers = [
            KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g{g}")
            for g in range(GROUPS)
        ]
        partitions = [TopicPartition("t", p) for p in range(PARTITIONS)]
        for offset in range(ROUNDS):
            for consumer in consumers:
                consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp in partitions})
        for consumer in consumers:
            consumer.close()
        offsets_dir = data / "__consumer_offsets-0"
        deadline = time.monotonic() + 60
        while _records_on_disk(offsets_dir)[1] > 100_000 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert broker.stop() == 0
        size, records = _records_on_disk(offsets_dir)
        # Uncleaned, a million commit records take ~90 MB; cleaned, the closed segments
        # hold one record per (group, partition) and the active one at most a segment.
        assert size < 3 * SEGMENT_BYTES, size
        assert records < 100_000, records
        started = time.monotonic()
        broker.start()
        restart_s = time.monotonic() - started
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g2")
        assert consumer.committed(TopicPartition("t", 123)) == ROUNDS - 1
        consumer.close()
        print(f"offsets log {size} bytes, {records} records; restart {restart_s:.2f} s")
        assert restart_s < 30
    finally:
        broker.stop()
