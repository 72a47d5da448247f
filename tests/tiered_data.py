"""A real broker whose topic is partly offloaded to a file:// remote tier, for the Spark,
pipeline and notebook tests: small segments and a small local retention, so a few thousand
activity events leave most of each partition only in the remote tier."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.files import present_bytes
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import end_offset
from tierlog.tools.activity import activity_stream

SEGMENT_BYTES = 6000
LOCAL_RETENTION_BYTES = 15000
FAST = {
    "log.segment.bytes": str(SEGMENT_BYTES),
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
    # The metrics endpoint on a free port: tests wait on its counters of remote cycles and
    # retention passes (tests/integration/broker_metrics.py) rather than sleep.
    "metrics.http.port": "0",
}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
Row = tuple[int, int, bytes | None, bytes, int]  # partition, offset, key, value, timestamp ms


@dataclass
class TieredTopic:
    broker: BrokerProcess
    topic: str
    partitions: int
    produced: int

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def remote_url(self) -> str:
        return f"file://{self.broker.data_dir / 'remote'}"

    def store(self) -> FsspecRemoteStore:
        return FsspecRemoteStore(self.remote_url)

    def remote_ends(self) -> dict[int, int]:
        store = self.store()
        return {p: end_offset(store.read_manifest(self.topic, p)) for p in range(self.partitions)}


def start_broker(data_dir: Path, **extra: str) -> BrokerProcess:
    return BrokerProcess(data_dir, {**FAST, **extra}).start()


def create_tiered_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "remote.storage.enable": "true",
        "local.retention.bytes": str(LOCAL_RETENTION_BYTES),
        "retention.ms": "-1",
    }
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=10)


def produce_activity(
    bootstrap: str, topic: str, count: int, *, first: int = 0, codecs: tuple[str, ...] = CODECS
) -> None:
    """``count`` activity events (numbered from ``first``), in equal runs per codec so the
    log holds batches of every codec; keyed by user."""
    events = list(activity_stream(first + count, start_ms=1_700_000_000_000))[first:]
    per_codec = -(-count // len(codecs))
    for n, codec in enumerate(codecs):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "batch.num.messages": 50,
                "enable.idempotence": True,
            }
        )
        for event in events[n * per_codec : (n + 1) * per_codec]:
            producer.produce(
                topic, key=event.key(), value=event.value(), timestamp=event.timestamp_ms
            )
        assert producer.flush(30) == 0


def _local_segments(tiered: TieredTopic, partition: int) -> list[Path]:
    return sorted((tiered.broker.data_dir / f"{tiered.topic}-{partition}").glob("*.log"))


def wait_offloaded(tiered: TieredTopic, timeout: float = 60.0) -> dict[int, int]:
    """Until offload has settled: every closed segment of every partition is committed
    remotely (the remote end is the active segment's base offset) and the local log was
    trimmed behind them, so some offsets are only remote. Returns the remote ends."""
    deadline = time.monotonic() + timeout
    while True:
        ends = tiered.remote_ends()
        settled = True
        for p in range(tiered.partitions):
            segments = _local_segments(tiered, p)
            active_base = int(segments[-1].stem) if segments else -1
            local_bytes = present_bytes(segments)
            trimmed = local_bytes <= LOCAL_RETENTION_BYTES + SEGMENT_BYTES
            settled = settled and ends[p] > 0 and ends[p] == active_base and trimmed
        if settled:
            return ends
        if time.monotonic() > deadline:
            raise AssertionError(f"{tiered.topic} not offloaded in {timeout}s: remote ends {ends}")
        time.sleep(0.2)


def tiered_topic(
    data_dir: Path, topic: str = "activity", partitions: int = 2, count: int = 4000
) -> TieredTopic:
    """A started broker with ``topic`` filled and partly offloaded (caller stops the broker)."""
    broker = start_broker(data_dir)
    try:
        create_tiered_topic(broker.bootstrap, topic, partitions)
        produce_activity(broker.bootstrap, topic, count)
        tiered = TieredTopic(broker, topic, partitions, count)
        wait_offloaded(tiered)
    except BaseException:
        broker.stop()
        raise
    return tiered


@contextmanager
def running_tiered_topic(data_dir: Path, count: int) -> Iterator[TieredTopic]:
    """``tiered_topic`` for a ``with`` block (module fixtures): the broker stops at its end."""
    topic = tiered_topic(data_dir, count=count)
    try:
        yield topic
    finally:
        topic.broker.stop()


def topic_rows(tiered: TieredTopic) -> list[Row]:
    """Every record of the topic, read through the broker by a confluent_kafka consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": tiered.bootstrap,
            "group.id": "reference",
            "enable.auto.commit": False,
        }
    )
    rows: list[Row] = []
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(tiered.topic, p), timeout=10)[1]
            for p in range(tiered.partitions)
        }
        consumer.assign([TopicPartition(tiered.topic, p, 0) for p in range(tiered.partitions)])
        deadline = time.monotonic() + 60
        while len(rows) < sum(ends.values()) and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=1):
                assert m.error() is None, m.error()
                rows.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        consumer.close()
    assert len(rows) == sum(ends.values()), f"read {len(rows)} of {sum(ends.values())} records"
    return sorted(rows)
