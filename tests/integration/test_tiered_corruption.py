"""Damaged object-store bytes are never served (issue 20, item 7), under a real broker
subprocess, on S3 (moto's server through s3fs) and on ``file://``.

Remote ``.log`` objects are overwritten with a flipped byte and with a garbled length
field, as the issue found them served: a Fetch of them answers KAFKA_STORAGE_ERROR
(retriable: consumers wait at the damage) instead of error 0 with a batch whose CRC is
wrong; a consumer that does not check CRCs (librdkafka's default) receives nothing
changed; the broker logs one ERROR line naming the object, the offsets and the store,
however often consumers retry; the intact batches before the damage are still served;
the Spark source's direct read of the same objects fails naming them too. A checksum
recorded in the manifest catches a damaged index on download.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.broker.harness import BrokerProcess
from tests.integration.tiered_s3 import (
    FAST,
    KAFKA_STORAGE_ERROR,
    consume,
    create_topic,
    produce,
    raw_fetch,
    wait_until,
)
from tests.remote.conftest import S3Bucket
from tierlog.remote.api import CorruptRemoteDataError, IndexKind, RemoteSegment, RemoteStore
from tierlog.remote.fsspec_root import open_filesystem
from tierlog.remote.manifest import committed_segments, segment_part
from tierlog.remote.registry import open_store

PREFIX = "remote.log.storage.options."


class Tier:
    """The broker's remote tier as the test sees it: URL, options, the store."""

    def __init__(self, url: str, options: dict[str, Any], broker_options: dict[str, str]):
        self.url = url
        self.options = options
        self.broker_options = broker_options
        self.fs, _ = open_filesystem(url, options)

    def store(self) -> RemoteStore:
        return open_store(self.url, self.options)

    def rewrite(self, object_url: str, change: Any) -> None:
        """Replace the object's bytes with ``change(bytes)``, behind the broker's back."""
        path = self.fs._strip_protocol(object_url)
        data = bytearray(self.fs.cat_file(path))
        change(data)
        self.fs.pipe_file(path, bytes(data))


@pytest.fixture(params=["s3", "file"])
def tier(request: pytest.FixtureRequest, tmp_path: Path) -> Tier:
    if request.param == "file":
        url = (tmp_path / "remote").as_uri()
        return Tier(url, {}, {"remote.log.storage.url": url})
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    options = {
        "endpoint_url": bucket.endpoint_url,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
        "skip_instance_cache": True,
    }
    return Tier(
        bucket.url,
        options,
        {
            "remote.log.storage.url": bucket.url,
            f"{PREFIX}endpoint_url": bucket.endpoint_url,
            f"{PREFIX}key": "testing",
            f"{PREFIX}secret": "testing",
            f"{PREFIX}client_kwargs.region_name": "us-east-1",
            f"{PREFIX}config_kwargs.retries.max_attempts": "1",
        },
    )


def offloaded(tier: Tier, data: Path, topic: str, brokers: list[BrokerProcess]) -> BrokerProcess:
    """A broker on ``tier`` with 1000 records of ``topic``, at least three segments of
    them committed remotely and gone from the local tier."""
    broker = BrokerProcess(data, {**FAST, **tier.broker_options}).start()
    brokers.append(broker)
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1000)
    store = tier.store()

    def remote_only() -> bool:
        committed = committed_segments(store.read_manifest(topic, 0))
        logs = sorted((data / f"{topic}-0").glob("*.log"))
        return len(committed) >= 3 and int(logs[0].stem) > committed[2].end_offset

    wait_until(remote_only, 60, "offloaded")
    return broker


def segments(tier: Tier, topic: str) -> list[RemoteSegment]:
    return committed_segments(tier.store().read_manifest(topic, 0))


def flip_a_record_byte(data: bytearray) -> None:
    data[100] ^= 0x40  # inside the first batch's records: covered by its CRC-32C


def garble_first_length(data: bytearray) -> None:
    struct.pack_into(">i", data, 8, 0x7FFFFF00)  # batchLength: far past the object's end


@pytest.mark.timeout(400)  # a broker offloading, then a Spark session's first queries
def test_damaged_remote_bytes_are_never_served(
    tmp_path: Path, tier: Tier, brokers: list[BrokerProcess], spark: Any
) -> None:
    topic = f"damaged-{uuid.uuid4().hex[:6]}"
    broker = offloaded(tier, tmp_path / "data", topic, brokers)
    flipped, garbled, intact = segments(tier, topic)[:3]
    store = tier.store()
    assert flipped.part("log") is not None and flipped.part("log").crc32c is not None  # type: ignore[union-attr]
    tier.rewrite(store.object_url(flipped), flip_a_record_byte)
    tier.rewrite(store.object_url(garbled), garble_first_length)

    for segment in (flipped, garbled):
        # Twice: consumers retry; the broker says so once.
        for _ in range(2):
            assert raw_fetch(broker.port, topic, segment.base_offset) == (KAFKA_STORAGE_ERROR, b"")
    log_text = broker.log_text()
    for segment in (flipped, garbled):
        url = store.object_url(segment)
        lines = [line for line in log_text.splitlines() if url in line]
        assert len(lines) == 1, lines
        assert "ERROR" in lines[0] and "not served" in lines[0]
        assert f"offsets {segment.base_offset}-" in lines[0] and tier.url in lines[0]
    assert "CRC-32C" in log_text and "runs past the end of the segment" in log_text

    # A consumer that does not check CRCs (librdkafka's default) gets no changed value:
    # nothing at the damaged offset, the intact segment after it as it was.
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "check.crcs": False}
    )
    consumer.assign([TopicPartition(topic, 0, flipped.base_offset)])
    try:
        got = [consumer.poll(0.3) for _ in range(10)]
        assert all(m is None or m.error() is not None for m in got)
    finally:
        consumer.close()
    assert consume(broker.bootstrap, topic, intact.base_offset, 5) == list(
        range(intact.base_offset, intact.base_offset + 5)
    )

    # The Spark source reads remote segments straight from the store: it fails the same
    # way, naming the object, instead of returning rows of a damaged batch (or, for the
    # garbled length, silently fewer rows).
    options = {
        "tierlog.tiers": "remote",
        "subscribe": topic,
        "remote.log.storage.url": tier.url,
        **{k: v for k, v in tier.broker_options.items() if k.startswith(PREFIX)},
    }
    for segment in (flipped, garbled):
        with pytest.raises(Exception) as raised:  # Spark wraps the Python worker's error
            (
                spark.read.format("tierlog")
                .options(
                    **options,
                    startingOffsets=f'{{"{topic}":{{"0":{segment.base_offset}}}}}',
                    endingOffsets=f'{{"{topic}":{{"0":{segment.end_offset + 1}}}}}',
                )
                .load()
                .count()
            )
        assert "CorruptRemoteDataError" in str(raised.value)
        assert store.object_url(segment) in str(raised.value)
    assert broker.stop() == 0


@pytest.mark.timeout(200)
def test_a_damaged_index_is_caught_by_the_manifest_checksum(
    tmp_path: Path, tier: Tier, brokers: list[BrokerProcess]
) -> None:
    """Indexes are downloaded whole: their CRC-32C, recorded in the manifest at upload,
    is checked on download, and a damaged one is refused naming its object."""
    topic = f"index-{uuid.uuid4().hex[:6]}"
    broker = offloaded(tier, tmp_path / "data", topic, brokers)
    segment = segments(tier, topic)[0]
    store = tier.store()
    assert len(store.fetch_index(segment, IndexKind.OFFSET)) > 0
    # Byte 3 of the index part, wherever it lies in its object (issue 24: one object).
    at = segment_part(segment, "index").offset + 3
    tier.rewrite(store.object_url(segment, "index"), lambda data: data.__setitem__(at, 0x55))
    with pytest.raises(CorruptRemoteDataError, match="the manifest recorded") as raised:
        store.fetch_index(segment, IndexKind.OFFSET)
    assert raised.value.object_url == store.object_url(segment, "index")
    # A fetch inside the segment needs its index: it fails.
    assert raw_fetch(broker.port, topic, segment.end_offset) == (KAFKA_STORAGE_ERROR, b"")
    # One from the segment's start needs none (a replay reads on from where it is), and
    # its bytes are checked batch by batch: it is served.
    code, records = raw_fetch(broker.port, topic, segment.base_offset)
    assert code == 0 and records
    assert broker.stop() == 0
