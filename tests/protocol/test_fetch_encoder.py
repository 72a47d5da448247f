"""encode_fetch_response against kio's FetchResponse reader and writer, every version."""

from __future__ import annotations

import datetime
import io
import os
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from tierlog.local.segment import FileSlice
from tierlog.protocol import (
    SUPPORTED,
    AbortedTransaction,
    ApiKey,
    EpochEndOffset,
    ErrorCode,
    FetchPartitionData,
    FetchTopicData,
    LeaderIdAndEpoch,
    NodeEndpoint,
    SnapshotId,
    encode_fetch_response,
)
from tierlog.protocol.fetch_encoder import INLINE_RECORDS_MAX

FETCH_VERSIONS = list(range(SUPPORTED[ApiKey.FETCH][0], SUPPORTED[ApiKey.FETCH][1] + 1))
TOPIC_A = uuid.UUID("0b7e0f53-7bb9-4d3b-8f4e-6e3f7c1e2a01")
TOPIC_B = uuid.UUID("5c9d2a10-0d61-4a4c-b2d5-3c0a4f6b9e02")


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[int]:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 400)  # 102400 bytes
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def materialise(parts: list[Any]) -> bytes:
    return b"".join(p.read() if isinstance(p, FileSlice) else bytes(p) for p in parts)


def content(fd: int) -> list[FetchTopicData]:
    return [
        FetchTopicData(
            topic="orders",
            topic_id=TOPIC_A,
            partitions=[
                # Records from a segment file, read_uncommitted (no aborted list).
                FetchPartitionData(0, 0, 1000, 1000, 0, records=FileSlice(fd, 100, 5000)),
                # Errors with leader hints and everything optional set.
                FetchPartitionData(
                    1,
                    error_code=6,
                    high_watermark=11,
                    last_stable_offset=9,
                    log_start_offset=2,
                    aborted_transactions=[AbortedTransaction(7, 3), AbortedTransaction(8, 5)],
                    preferred_read_replica=3,
                    records=b"inline-records",
                    diverging_epoch=EpochEndOffset(3, 40),
                    current_leader=LeaderIdAndEpoch(2, 7),
                    snapshot_id=SnapshotId(55, 4),
                ),
                # Nothing to return; read_committed with no aborted transactions.
                FetchPartitionData(2, high_watermark=5, aborted_transactions=[]),
                # Null records; default-valued tags must not be written.
                FetchPartitionData(3, records=None, current_leader=LeaderIdAndEpoch()),
            ],
        ),
        FetchTopicData(
            topic="events",
            topic_id=TOPIC_B,
            partitions=[
                FetchPartitionData(9, 0, 77, 77, 10, records=FileSlice(fd, 0, 70000)),
                FetchPartitionData(10, 0, 77, 77, 10, records=memoryview(b"m" * 300)),
            ],
        ),
        FetchTopicData(topic="empty", topic_id=uuid.UUID(int=3), partitions=[]),
    ]


def kio_entity(version: int, topics: list[FetchTopicData], fd: int) -> Any:
    """The same content as a kio FetchResponse of ``version``."""
    response_type = load_response_schema(1, version)
    module = __import__(response_type.__module__, fromlist=["x"])

    def partition(p: FetchPartitionData) -> Any:
        fields: dict[str, Any] = {
            "partition_index": p.partition_index,
            "error_code": ErrorCode(p.error_code),
            "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset,
            "aborted_transactions": None
            if p.aborted_transactions is None
            else tuple(
                module.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                for a in p.aborted_transactions
            ),
            "records": None
            if p.records is None
            else p.records.read()
            if isinstance(p.records, FileSlice)
            else bytes(p.records),  # type: ignore[arg-type]
        }
        if version >= 5:
            fields["log_start_offset"] = p.log_start_offset
        if version >= 11:
            fields["preferred_read_replica"] = p.preferred_read_replica
        if version >= 12:
            if p.diverging_epoch is not None:
                fields["diverging_epoch"] = module.EpochEndOffset(
                    epoch=p.diverging_epoch.epoch, end_offset=p.diverging_epoch.end_offset
                )
            if p.current_leader is not None:
                fields["current_leader"] = module.LeaderIdAndEpoch(
                    leader_id=p.current_leader.leader_id,
                    leader_epoch=p.current_leader.leader_epoch,
                )
            if p.snapshot_id is not None:
                fields["snapshot_id"] = module.SnapshotId(
                    end_offset=p.snapshot_id.end_offset, epoch=p.snapshot_id.epoch
                )
        return module.PartitionData(**fields)

    def topic(t: FetchTopicData) -> Any:
        parts = tuple(partition(p) for p in t.partitions)
        if version >= 13:
            return module.FetchableTopicResponse(topic_id=t.topic_id, partitions=parts)
        return module.FetchableTopicResponse(topic=t.topic, partitions=parts)

    fields: dict[str, Any] = {
        "throttle_time": i32Timedelta.parse(datetime.timedelta(milliseconds=25)),
        "responses": tuple(topic(t) for t in topics),
    }
    if version >= 7:
        fields["error_code"] = ErrorCode.none
        fields["session_id"] = 1234
    if version >= 16:
        fields["node_endpoints"] = (
            module.NodeEndpoint(node_id=2, host="broker-2", port=9093, rack="r1"),
            module.NodeEndpoint(node_id=3, host="broker-3", port=9094, rack=None),
        )
    return response_type(**fields)


ENDPOINTS = [NodeEndpoint(2, "broker-2", 9093, "r1"), NodeEndpoint(3, "broker-3", 9094)]


def encode(version: int, fd: int) -> tuple[bytes, Any]:
    encoded = encode_fetch_response(
        version,
        0x0A0B0C0D,
        content(fd),
        throttle_time_ms=25,
        session_id=1234,
        node_endpoints=ENDPOINTS,
    )
    raw = materialise(encoded.parts)
    assert len(raw) == encoded.size
    assert struct.unpack(">i", raw[:4])[0] == len(raw) - 4
    return raw, encoded


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_kio_reads_what_we_wrote(version: int, segment: int) -> None:
    raw, _ = encode(version, segment)
    response_type = load_response_schema(1, version)
    header, header_size = entity_reader(response_type.__header_schema__)(raw, 4)
    assert header.correlation_id == 0x0A0B0C0D
    assert header_size == (5 if version >= 12 else 4)  # header v1 has a tag section
    body, body_size = entity_reader(response_type)(raw, 4 + header_size)
    assert 4 + header_size + body_size == len(raw)
    assert body.throttle_time == datetime.timedelta(milliseconds=25)
    if version >= 7:
        assert (body.error_code, body.session_id) == (0, 1234)
    orders, events, empty = body.responses
    if version >= 13:
        assert [orders.topic_id, events.topic_id, empty.topic_id] == [
            TOPIC_A,
            TOPIC_B,
            uuid.UUID(int=3),
        ]
    else:
        assert [orders.topic, events.topic, empty.topic] == ["orders", "events", "empty"]
    p0, p1, p2, p3 = orders.partitions
    assert bytes(p0.records) == os.pread(segment, 5000, 100)
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 1000, 1000)
    assert p0.aborted_transactions is None
    assert (p1.partition_index, p1.error_code, p1.high_watermark) == (1, 6, 11)
    assert [(a.producer_id, a.first_offset) for a in p1.aborted_transactions] == [(7, 3), (8, 5)]
    assert bytes(p1.records) == b"inline-records"
    assert p2.aborted_transactions == () and bytes(p2.records) == b""
    assert p3.records is None
    if version >= 5:
        assert (p0.log_start_offset, p1.log_start_offset) == (0, 2)
    if version >= 11:
        assert (p0.preferred_read_replica, p1.preferred_read_replica) == (-1, 3)
    if version >= 12:
        assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (3, 40)
        assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (2, 7)
        assert (p1.snapshot_id.end_offset, p1.snapshot_id.epoch) == (55, 4)
        assert p0.current_leader.leader_id == -1
    e9, e10 = events.partitions
    assert bytes(e9.records) == os.pread(segment, 70000, 0)
    assert bytes(e10.records) == b"m" * 300
    assert empty.partitions == ()
    if version >= 16:
        assert [(n.node_id, n.host, n.port, n.rack) for n in body.node_endpoints] == [
            (2, "broker-2", 9093, "r1"),
            (3, "broker-3", 9094, None),
        ]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_same_bytes_as_kio_writer(version: int, segment: int) -> None:
    raw, _ = encode(version, segment)
    out = io.BytesIO()
    entity_writer(load_response_schema(1, version))(
        out, kio_entity(version, content(segment), segment)
    )
    header_size = 5 if version >= 12 else 4
    assert raw[4 + header_size :] == out.getvalue()


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 16])
def test_kafka_python_reads_it(version: int, segment: int) -> None:
    raw, _ = encode(version, segment)
    parsed = KpFetchResponse[version].decode(raw[4:], header=True)
    assert parsed.header.correlation_id == 0x0A0B0C0D
    first = parsed.responses[0]
    if version >= 13:
        assert first.topic_id == TOPIC_A
    else:
        assert first.topic == "orders"
    assert [p.partition_index for p in first.partitions] == [0, 1, 2, 3]
    assert first.partitions[1].high_watermark == 11


def test_slices_are_passed_through_not_copied(segment: int) -> None:
    _, encoded = encode(12, segment)
    slices = [p for p in encoded.parts if isinstance(p, FileSlice)]
    assert slices == [FileSlice(segment, 100, 5000), FileSlice(segment, 0, 70000)]
    assert all(isinstance(p, bytes | memoryview | FileSlice) for p in encoded.parts)
    # bytes parts around the slices: header .. slice .. between .. slice .. rest
    kinds = [type(p).__name__ for p in encoded.parts]
    assert kinds == ["bytes", "FileSlice", "bytes", "FileSlice", "bytes"]


def test_large_bytes_records_get_their_own_part(segment: int) -> None:
    big = b"x" * (INLINE_RECORDS_MAX + 1)
    small = b"y" * INLINE_RECORDS_MAX
    encoded = encode_fetch_response(
        12,
        1,
        [
            FetchTopicData(
                topic="t",
                partitions=[
                    FetchPartitionData(0, records=big),
                    FetchPartitionData(1, records=small),
                ],
            )
        ],
    )
    assert any(p is big for p in encoded.parts)
    assert not any(p is small for p in encoded.parts)
    assert len(materialise(encoded.parts)) == encoded.size


def test_empty_response_is_one_part() -> None:
    encoded = encode_fetch_response(12, 5, [])
    assert len(encoded.parts) == 1
    raw = materialise(encoded.parts)
    body, _ = entity_reader(load_response_schema(1, 12))(raw, 4 + 5)
    assert body.responses == ()


def test_unsupported_version_and_missing_topic_id() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(3, 1, [])
    with pytest.raises(ValueError):
        encode_fetch_response(17, 1, [])
    with pytest.raises(ValueError):
        encode_fetch_response(13, 1, [FetchTopicData(topic="no-id", partitions=[])])


def test_node_endpoints_only_from_v16(segment: int) -> None:
    without = encode_fetch_response(15, 1, [], node_endpoints=ENDPOINTS)
    assert without.size == encode_fetch_response(15, 1, []).size
    with_ = encode_fetch_response(16, 1, [], node_endpoints=ENDPOINTS)
    assert with_.size > without.size
