"""A broker subprocess whose remote tier is on S3 (moto's HTTP server, s3fs), and the
test's own views of it (the bucket, the local log, raw Fetch and ListOffsets): what
tests/integration/test_tiered_failures.py and test_tiered_data_loss.py share."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.broker.harness import BrokerProcess
from tests.files import present_bytes
from tests.raw_client import RawClient, fetch_body, request
from tests.remote.conftest import s3_options
from tierlog.protocol import ApiKey, ErrorCode

BASE_TS = 1_700_000_000_000
SEGMENT_BYTES = 16384
LOCAL_RETENTION = 32768
FAST = {
    "log.segment.bytes": str(SEGMENT_BYTES),
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
    # Tests wait on its counters of remote cycles and retention passes rather than sleep
    # (tests/integration/broker_metrics.py).
    "metrics.http.port": "0",
}
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)  # 56, retriable


def s3_broker(data: Path, endpoint: str, bucket: str) -> BrokerProcess:
    """A broker (not started) whose remote tier is ``s3://<bucket>/tiered`` on ``endpoint``;
    botocore does not retry and times out fast, so an outage shows within a second."""
    prefix = "remote.log.storage.options."
    return BrokerProcess(
        data,
        {
            **FAST,
            "remote.log.storage.url": f"s3://{bucket}/tiered",
            f"{prefix}endpoint_url": endpoint,
            f"{prefix}key": "testing",
            f"{prefix}secret": "testing",
            f"{prefix}client_kwargs.region_name": "us-east-1",
            f"{prefix}config_kwargs.connect_timeout": "1",
            f"{prefix}config_kwargs.read_timeout": "5",
            f"{prefix}config_kwargs.retries.max_attempts": "1",
        },
    )


class Remote:
    """The test's own view of the bucket (s3fs, no listing cache)."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        import s3fs

        self.fs = s3fs.S3FileSystem(**s3_options(endpoint))
        self.root = f"{bucket}/tiered"

    def manifest_path(self, topic: str) -> str:
        return f"{self.root}/{topic}-0/manifest.json"

    def manifest(self, topic: str) -> dict[str, Any]:
        """The current manifest version's JSON, found through the pointer
        (``tierlog.remote.manifest``)."""
        # Listings are cached (objects() lists): a version created since would be "missing".
        self.fs.invalidate_cache(f"{self.root}/{topic}-0")
        try:
            doc = dict(json.loads(self.fs.cat_file(self.manifest_path(topic))))
            if doc.get("format") == "tierlog-remote-manifest-pointer":
                doc = dict(json.loads(self.fs.cat_file(self.current_version_path(topic))))
            return doc
        except FileNotFoundError:
            return {"segments": [], "log_start_offset": 0}

    def current_version_path(self, topic: str) -> str:
        """The version object the pointer names: the manifest proper."""
        pointer = json.loads(self.fs.cat_file(self.manifest_path(topic)))
        return f"{self.root}/{topic}-0/{pointer['object']}"

    def committed(self, topic: str) -> list[dict[str, Any]]:
        return [s for s in self.manifest(topic)["segments"] if s["state"] == "COPY_FINISHED"]

    def objects(self, topic: str) -> set[str]:
        try:
            entries = self.fs.ls(f"{self.root}/{topic}-0", refresh=True)
        except FileNotFoundError:
            return set()
        return {str(e).rsplit("/", 1)[-1] for e in entries}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "remote.storage.enable": "true",
        "local.retention.bytes": str(LOCAL_RETENTION),
        "retention.ms": "-1",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=10)


def value(i: int) -> bytes:
    return b"%06d" % i + b"-" * 100


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Messages ``start .. start+count-1``: value numbered, timestamp BASE_TS + i s."""
    # Batches of 20 (~2.5 KiB) stay well below segment.bytes (16 KiB).
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 20, "acks": "all"}
    )
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for i in range(start, start + count):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=value(i),
            timestamp=BASE_TS + i * 1000,
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0
    assert errors == []


def local_logs(data: Path, topic: str) -> list[Path]:
    return sorted((data / f"{topic}-0").glob("*.log"))


def local_size(data: Path, topic: str) -> int:
    return present_bytes(local_logs(data, topic))


def local_start(data: Path, topic: str) -> int:
    return int(local_logs(data, topic)[0].stem)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not {what} within {timeout}s")


def wait_for_offload(remote: Remote, data: Path, topic: str, timeout: float = 30) -> None:
    """Until every closed local segment is committed remotely and the local tier is
    trimmed to its hot tail (local.retention.bytes plus the active segment)."""

    def done() -> bool:
        committed = remote.committed(topic)
        logs = local_logs(data, topic)
        return (
            bool(committed)
            and committed[-1]["end_offset"] + 1 == int(logs[-1].stem)
            and local_size(data, topic) <= LOCAL_RETENTION + SEGMENT_BYTES
        )

    wait_until(done, timeout, f"offloaded ({remote.manifest(topic)})")


def assert_contiguous_from_zero(remote: Remote, topic: str) -> None:
    committed = remote.committed(topic)
    assert committed[0]["base_offset"] == 0
    for before, after in itertools.pairwise(committed):
        assert after["base_offset"] == before["end_offset"] + 1


def consume(bootstrap: str, topic: str, start: int, count: int, timeout: float = 30) -> list[int]:
    """Numbers of the ``count`` messages from offset ``start`` (confluent-kafka)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    got: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            got.append(int(msg.value()[:6]))
    finally:
        consumer.close()
    return got


def kafka_python_replay(bootstrap: str, topic: str, count: int) -> tuple[list[int], int, Any]:
    """(numbers read from offset 0, beginning offset, offsets_for_times of message 123)."""
    kc = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        tp = KTopicPartition(topic, 0)
        kc.assign([tp])
        beginning = kc.beginning_offsets([tp])[tp]
        kc.seek(tp, 0)
        got: list[int] = []
        for message in kc:
            got.append(int(message.value[:6]))
            if len(got) == count:
                break
        found = kc.offsets_for_times({tp: BASE_TS + 123 * 1000 + 1})[tp]
        return got, beginning, found
    finally:
        kc.close()


def raw_call(port: int, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """One request on a fresh connection; the decoded response."""
    client = RawClient(port)
    try:
        return client.call(request(api_key, version, data))
    finally:
        client.close()


def raw_fetch(port: int, topic: str, offset: int) -> tuple[int, bytes]:
    """(error code, records) of a one-partition Fetch v11 at ``offset`` (no long poll)."""
    response = raw_call(port, ApiKey.FETCH, 11, fetch_body(topic, {0: offset}))
    partition = response.responses[0].partitions[0]
    return int(partition.error_code), bytes(partition.records or b"")


def raw_list_offset(port: int, topic: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v5 for ``timestamp``."""
    response = raw_call(
        port,
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        },
    )
    partition = response.topics[0].partitions[0]
    return int(partition.error_code), int(partition.offset)


def spark_tiers(
    spark: Any, bootstrap: str, topic: str, url: str, options: dict[str, str]
) -> list[tuple[int, str]]:
    """(offset, tier) of every record the Spark source reads from ``topic``: the remote
    segments straight from the store at ``url`` (with ``options``), the rest from the leader."""
    reader = (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("remote.log.storage.url", url)
        .option("tierlog.includeTier", "true")
    )
    for key, value in options.items():
        reader = reader.option(f"remote.log.storage.options.{key}", value)
    return [(r["offset"], r["tier"]) for r in reader.load().select("offset", "tier").collect()]
