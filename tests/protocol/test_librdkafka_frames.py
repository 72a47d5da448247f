"""Requests exactly as librdkafka 2.16 (confluent-kafka 2.16.1) put them on the wire.

Captured from a producer and consumers talking to a throwaway server built on this package
(ApiVersions and Metadata answered with ``encode_response``), so these are the versions and
encodings librdkafka picks against our ``ADVERTISED`` table.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

from tierlog.protocol import decode_request

PRODUCE_V10 = bytes.fromhex(
    "0000000a00000002000772646b61666b610000ffff00007530020374300200000000700000000000"
    "000000000000630000000002f72b4ef6000000000004000001a1ffe43cf5000001a1ffe43cf5ffff"
    "ffffffffffffffffffffffff0000000512000000026b0476300012000002026b0476310012000004"
    "026b0476320012000006026b0476330012000008026b04763400000000"
)
FETCH_V16 = bytes.fromhex(
    "0001001000000003000772646b61666b6100000001f400000001032000000100000000ffffffff02"
    "000000000000000000000000000000010200000000000000000000000000000000ffffffffffffff"
    "ffffffffff001000000000010100"
)
FIND_COORDINATOR_V2 = bytes.fromhex("000a000200000003000772646b61666b6100016700")
METADATA_V13 = bytes.fromhex(
    "0003000d00000002000772646b61666b6100020000000000000000000000000000000003743000010000"
)
INIT_PRODUCER_ID_V4 = bytes.fromhex(
    "0016000400000002000772646b61666b610000ffffffffffffffffffffffffffff00"
)


def test_produce_v10() -> None:
    request = decode_request(PRODUCE_V10)
    assert (request.api_key, request.api_version, request.client_id) == (0, 10, "rdkafka")
    body: Any = request.body
    assert body.acks == -1
    assert body.timeout == datetime.timedelta(seconds=30)
    (topic,) = body.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index) == ("t0", 0)
    batch = bytes(partition.records)
    base_offset, batch_length, _epoch, magic = struct.unpack_from(">qiib", batch, 0)
    assert (base_offset, magic) == (0, 2)
    assert batch_length == len(batch) - 12
    assert struct.unpack_from(">i", batch, 57)[0] == 5  # record count


def test_fetch_v16_uses_topic_ids() -> None:
    body: Any = decode_request(FETCH_V16).body
    assert body.isolation_level == 1  # read_committed, librdkafka's default
    assert (body.session_id, body.session_epoch) == (0, -1)
    (topic,) = body.topics
    assert topic.topic_id == uuid.UUID(int=1)
    (partition,) = topic.partitions
    assert (partition.partition, partition.fetch_offset) == (0, 0)
    assert partition.partition_max_bytes == 1048576
    assert body.replica_state.replica_id == -1


def test_find_coordinator_v2() -> None:
    body: Any = decode_request(FIND_COORDINATOR_V2).body
    assert (body.key, body.key_type) == ("g", 0)


def test_metadata_v13_for_one_topic() -> None:
    body: Any = decode_request(METADATA_V13).body
    assert [t.name for t in body.topics] == ["t0"]
    assert body.allow_auto_topic_creation is True


def test_init_producer_id_v4() -> None:
    request = decode_request(INIT_PRODUCER_ID_V4)
    body: Any = request.body
    assert (request.api_key, request.api_version) == (22, 4)
    assert body.transactional_id is None
    assert (body.producer_id, body.producer_epoch) == (-1, -1)
    # kio turns the int32 milliseconds -1 into a (negative) timedelta.
    assert body.transaction_timeout == datetime.timedelta(milliseconds=-1)


def test_librdkafka_all_topics_metadata_request() -> None:
    """librdkafka 2.16's MetadataRequest v13 for all topics, as captured on the wire: its
    null array length is a 4-byte placeholder, so 3 stray bytes follow (librdkafka#5049)."""
    raw = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    request = decode_request(raw)
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 13, 3)
    assert request.client_id == "rdkafka"
    assert request.body.topics is None  # type: ignore[union-attr]


def test_librdkafka_api_versions_request() -> None:
    raw = bytes.fromhex(
        "0012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f"
        "6e16322e31362e312d72646b61666b612d322e31362e3000"
    )
    request = decode_request(raw)
    assert (request.api_key, request.api_version) == (18, 3)
    body: Any = request.body
    assert body.client_software_name == "confluent-kafka-python"
    assert body.client_software_version == "2.16.1-rdkafka-2.16.0"
