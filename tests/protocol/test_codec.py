"""decode_request / encode_response against kafka-python's own encoder and decoder."""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import kio.schema.metadata.v12.response as mr12
import pytest
from kafka.protocol import admin as kp_admin
from kafka.protocol import consumer as kp_consumer
from kafka.protocol import metadata as kp_metadata
from kafka.protocol import producer as kp_producer
from kafka.protocol.consumer import FetchRequest, JoinGroupRequest, OffsetCommitRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.producer import ProduceRequest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as KioApiVersionsRequestV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as KioApiVersionsResponseV0
from kio.schema.metadata.v12.request import MetadataRequest as KioMetadataRequestV12
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i32, i32Timedelta

from tierlog.protocol import (
    ADVERTISED,
    SUPPORTED,
    ErrorCode,
    MalformedRequestError,
    MalformedResponseError,
    RequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_response,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    warm_codecs,
)
from tierlog.protocol.codec import response_type_for


def _kafka_python_classes(suffix: str) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for module in (kp_admin, kp_consumer, kp_metadata, kp_producer):
        for name in dir(module):
            obj = getattr(module, name)
            if isinstance(obj, type) and name.endswith(suffix) and hasattr(obj, "API_KEY"):
                found[obj.API_KEY] = obj
    return found


KP_REQUESTS = _kafka_python_classes("Request")
KP_RESPONSES = _kafka_python_classes("Response")
ALL_TOPICS_V12 = KioMetadataRequestV12(topics=None, include_topic_authorized_operations=False)
SUPPORTED_PAIRS = [(k, v) for k, (low, high) in SUPPORTED.items() for v in range(low, high + 1)]
# Client APIs, cross-checked with kafka-python's own encoders; the APIs kafka-python does not
# have (inter-broker ones such as AlterPartition, and KIP-848's consumer group APIs) are
# round-tripped through kio below.
ALL_VERSIONS = [(k, v) for k, v in SUPPORTED_PAIRS if k in KP_REQUESTS]
INTER_BROKER_VERSIONS = [(k, v) for k, v in SUPPORTED_PAIRS if k not in KP_REQUESTS]
# A request body (its required scalar fields) per API kafka-python cannot build
# (inter-broker ones, and Kafka 3.7+'s).
INTER_BROKER_SAMPLES: dict[int, dict[str, Any]] = {
    17: {"mechanism": "SCRAM-SHA-256"},  # SaslHandshake
    36: {"auth_bytes": b"n,,n=alice,r=abc"},  # SaslAuthenticate
    56: {"broker_id": 1, "broker_epoch": 25},  # AlterPartition
    68: {  # ConsumerGroupHeartbeat: a member joining
        "group_id": "g",
        "member_id": "m-1",
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    },
    69: {"group_ids": ["g"], "include_authorized_operations": False},  # ConsumerGroupDescribe
    71: {"client_instance_id": uuid.UUID(int=5)},  # GetTelemetrySubscriptions
    72: {  # PushTelemetry
        "client_instance_id": uuid.UUID(int=7),
        "subscription_id": 3,
        "terminating": False,
        "compression_type": 0,
        "metrics": b"",
    },
    74: {"resource_types": [16]},  # ListConfigResources
    75: {"topics": [{"name": "orders"}], "response_partition_limit": 2000},
}


def kp_encode(message: Any, correlation_id: int = 1, client_id: str | None = "kp") -> bytes:
    """A kafka-python request frame, without the size prefix."""
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True))


# --- requests from kafka-python -----------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS)
def test_every_supported_request_from_kafka_python_decodes(api_key: int, version: int) -> None:
    raw = kp_encode(KP_REQUESTS[api_key][version](), correlation_id=1000 + version)
    request = decode_request(raw)
    assert (request.api_key, request.api_version) == (api_key, version)
    assert request.response_version == version
    assert request.correlation_id == 1000 + version
    assert request.client_id == "kp"
    assert request.size == len(raw)
    assert type(request.body).__version__ == version
    header_type = RequestHeaderV2 if type(request.body).__flexible__ else RequestHeaderV1
    assert type(request.header) is header_type


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_requests(version: int) -> None:
    fields = {}
    if version >= 3:
        fields = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    request = decode_request(kp_encode(ApiVersionsRequest[version](**fields), 7))
    assert request.correlation_id == 7
    if version >= 3:
        assert request.body.client_software_name == "kafka-python"  # type: ignore[union-attr]
        assert request.body.client_software_version == "3.0.12"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [0, 1, 4, 9, 10, 12, 13])
def test_metadata_requests(version: int) -> None:
    topics: list[Any] | None = [
        MetadataRequest.MetadataRequestTopic(name=n) for n in ("orders", "events")
    ]
    if version >= 1:
        request = decode_request(kp_encode(MetadataRequest[version](topics=None), 3))
        assert request.body.topics is None  # type: ignore[union-attr]
    request = decode_request(kp_encode(MetadataRequest[version](topics=topics), 4))
    assert [t.name for t in request.body.topics] == ["orders", "events"]  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 10, 11])
def test_produce_requests_keep_records_opaque(version: int) -> None:
    batch = bytes(range(256)) * 40
    topic = ProduceRequest.TopicProduceData(
        name="orders",
        partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=batch[i:])
            for i in range(3)
        ],
    )
    message = ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=1500, topic_data=[topic]
    )
    request = decode_request(kp_encode(message, 11, client_id=None))
    body: Any = request.body
    assert request.client_id is None
    assert body.acks == -1
    assert body.timeout.total_seconds() == 1.5
    assert body.transactional_id is None
    (topic_data,) = body.topic_data
    assert topic_data.name == "orders"
    assert [p.index for p in topic_data.partition_data] == [0, 1, 2]
    assert [bytes(p.records) for p in topic_data.partition_data] == [batch, batch[1:], batch[2:]]


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 16])
def test_fetch_requests(version: int) -> None:
    topic_id = uuid.UUID("6b1f0b43-1b5c-4a4b-9c57-2e0b5e3b7a10")
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=2, fetch_offset=42, partition_max_bytes=1 << 20, current_leader_epoch=5
    )
    topic = FetchRequest.FetchTopic(topic="orders", topic_id=topic_id, partitions=[part])
    message = FetchRequest[version](
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, topics=[topic]
    )
    body: Any = decode_request(kp_encode(message, 12)).body
    (fetch_topic,) = body.topics
    if version >= 13:
        assert fetch_topic.topic_id == topic_id
    else:
        assert fetch_topic.topic == "orders"
    (fetch_part,) = fetch_topic.partitions
    assert (fetch_part.partition, fetch_part.fetch_offset) == (2, 42)
    assert fetch_part.partition_max_bytes == 1 << 20


@pytest.mark.parametrize("version", [0, 5, 7, 9])
def test_join_group_requests(version: int) -> None:
    protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01meta")]
    message = JoinGroupRequest[version](
        group_id="g1", session_timeout_ms=10_000, member_id="", protocol_type="consumer",
        protocols=protocols, rebalance_timeout_ms=30_000,
    )  # fmt: skip
    body: Any = decode_request(kp_encode(message, 5)).body
    assert body.group_id == "g1"
    assert [(p.name, bytes(p.metadata)) for p in body.protocols] == [("range", b"\x00\x01meta")]


@pytest.mark.parametrize("version", [2, 8, 9])
def test_offset_commit_requests(version: int) -> None:
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=1, committed_offset=99, committed_metadata="m"
    )
    topic = OffsetCommitRequest.OffsetCommitRequestTopic(name="orders", partitions=[part])
    message = OffsetCommitRequest[version](
        group_id="g", generation_id_or_member_epoch=3, member_id="m-1", topics=[topic]
    )
    body: Any = decode_request(kp_encode(message, 6)).body
    (topic_out,) = body.topics
    assert (topic_out.name, topic_out.partitions[0].committed_offset) == ("orders", 99)


# --- responses, checked by kafka-python ----------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), ALL_VERSIONS)
def test_every_response_matches_kafka_python_bytes(api_key: int, version: int) -> None:
    """kafka-python encodes a default response; kio reads it; we re-encode: same bytes."""
    request = decode_request(kp_encode(KP_REQUESTS[api_key][version](), correlation_id=77))
    reference = KP_RESPONSES[api_key][version]()
    reference.with_header(correlation_id=77)
    expected = bytes(reference.encode(header=True))
    correlation_id, body = decode_response(expected, api_key, version)
    assert correlation_id == 77
    framed = encode_response(request, body)
    assert struct.unpack(">i", framed[:4])[0] == len(framed) - 4
    assert framed[4:] == expected


def metadata_v12_response(topics: int, partitions: int) -> mr12.MetadataResponse:
    """A kio MetadataResponse v12 as a broker handler would build it."""
    return mr12.MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(
            mr12.MetadataResponseBroker(node_id=BrokerId(1), host="localhost", port=i32(9092)),
        ),
        cluster_id="cluster",
        controller_id=BrokerId(1),
        topics=tuple(
            mr12.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(f"topic-{t}"),
                topic_id=uuid.UUID(int=t + 1),
                partitions=tuple(
                    mr12.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=i32(p),
                        leader_id=BrokerId(1),
                        leader_epoch=i32(0),
                        replica_nodes=(BrokerId(1),),
                        isr_nodes=(BrokerId(1),),
                        offline_replicas=(),
                    )
                    for p in range(partitions)
                ),
            )
            for t in range(topics)
        ),
    )


def test_metadata_response_with_content_reads_back_in_kafka_python() -> None:
    body = metadata_v12_response(10, 4)
    request = decode_request(
        encode_request(
            KioMetadataRequestV12(topics=None, include_topic_authorized_operations=False), 31
        )[4:]
    )
    framed = encode_response(request, body)
    parsed = KP_RESPONSES[3][12].decode(framed[4:], header=True)
    assert parsed.header.correlation_id == 31
    assert [t.name for t in parsed.topics] == [f"topic-{t}" for t in range(10)]
    assert [t.topic_id for t in parsed.topics] == [uuid.UUID(int=t + 1) for t in range(10)]
    assert all(len(t.partitions) == 4 for t in parsed.topics)
    assert parsed.brokers[0].host == "localhost"


@pytest.mark.parametrize(("api_key", "version"), [(3, 0), (3, 8), (3, 9), (0, 9), (18, 3)])
def test_response_header_versions(api_key: int, version: int) -> None:
    request = decode_request(kp_encode(KP_REQUESTS[api_key][version](), correlation_id=0x01020304))
    reference = KP_RESPONSES[api_key][version]()
    reference.with_header(correlation_id=0x01020304)
    _, body = decode_response(bytes(reference.encode(header=True)), api_key, version)
    framed = encode_response(request, body)
    assert framed[4:8] == b"\x01\x02\x03\x04"
    flexible_header = type(body).__flexible__ and api_key != 18
    # header v1 adds an empty tagged-field section; ApiVersions always uses header v0.
    expected_body = bytes(reference.encode())
    assert framed[8:] == (b"\x00" + expected_body if flexible_header else expected_body)


def test_encode_response_rejects_the_wrong_body_type() -> None:
    request = decode_request(kp_encode(MetadataRequest[12](topics=None)))
    body = metadata_v12_response(1, 1)
    assert encode_response(request, body)
    with pytest.raises(TypeError):
        encode_response(request, api_versions_response(3))
    with pytest.raises(TypeError):
        encode_response(decode_request(kp_encode(MetadataRequest[11](topics=None))), body)


# --- ApiVersions of an unknown version ------------------------------------------------------


def _raw_api_versions(version: int, body: bytes, flexible_header: bool = True) -> bytes:
    header = struct.pack(">hhih", 18, version, 4242, 3) + b"abc"
    return header + (b"\x00" if flexible_header else b"") + body


@pytest.mark.parametrize(
    "raw",
    [
        _raw_api_versions(5, b"\x07future\x021\x00"),
        _raw_api_versions(5, b"\xff\xff garbage"),
        _raw_api_versions(999, b""),
        _raw_api_versions(7, b"", flexible_header=False),
        struct.pack(">hhi", 18, 5, 4242),  # nothing after the correlation id
    ],
)
def test_unknown_api_versions_version_is_answered(raw: bytes) -> None:
    request = decode_request(raw)
    assert request.api_key == 18
    assert request.api_version >= 5
    assert request.correlation_id == 4242
    assert request.response_version == 0
    assert isinstance(request.body, KioApiVersionsRequestV0)
    framed = encode_response(request, api_versions_response(request.api_version))
    assert framed == encode_api_versions_fallback(4242)
    # header v0: size, correlation id, then straight into the v0 body.
    assert struct.unpack(">ii", framed[:8]) == (len(framed) - 4, 4242)
    body, used = entity_reader(KioApiVersionsResponseV0)(framed, 8)
    assert used == len(framed) - 8
    assert body.error_code == ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == dict(ADVERTISED)
    parsed = KpApiVersionsResponse[0].decode(framed[4:], header=True)
    assert parsed.error_code == 35
    assert parsed.header.correlation_id == 4242


def test_unknown_api_versions_header_is_read_when_possible() -> None:
    request = decode_request(_raw_api_versions(5, b"\x07future\x021\x00"))
    assert request.client_id == "abc"
    assert type(request.header) is RequestHeaderV2


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), [(0, 2), (0, 12), (1, 3), (1, 17), (3, 14)])
def test_unsupported_versions(api_key: int, version: int) -> None:
    raw = struct.pack(">hhih", api_key, version, 55, -1) + b"\x00" * 20
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(raw)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (
        api_key,
        version,
        55,
    )


@pytest.mark.parametrize("api_key", [4, 38, 1000, -1])  # LeaderAndIsr, CreateDelegationToken
def test_unknown_api_keys(api_key: int) -> None:
    raw = struct.pack(">hhih", api_key, 0, 56, -1) + b"\x00" * 20
    with pytest.raises(UnknownApiKeyError) as info:
        decode_request(raw)
    assert (info.value.api_key, info.value.correlation_id) == (api_key, 56)


def test_a_codec_a_client_built_does_not_make_its_api_served() -> None:
    # A DescribeDelegationToken response read in this process (a client, a tool, a test)
    # builds a codec for key 41; a request with that key must still be an unknown API.
    response_type_for(41, 1)
    raw = struct.pack(">hhih", 41, 1, 57, -1) + b"\x00" * 20
    with pytest.raises(UnknownApiKeyError):
        decode_request(raw)


def test_trailing_bytes_are_ignored_like_kafka() -> None:
    raw = kp_encode(MetadataRequest[12](topics=None), correlation_id=9)
    assert decode_request(raw + b"\x01\x00\x00").body == decode_request(raw).body
    raw = kp_encode(MetadataRequest[4](topics=None), correlation_id=9)
    assert decode_request(raw + b"junk").body == decode_request(raw).body


def test_every_truncation_is_malformed() -> None:
    topic = ProduceRequest.TopicProduceData(
        name="t",
        partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"r" * 50)
        ],
    )
    raw = kp_encode(ProduceRequest[9](acks=1, timeout_ms=100, topic_data=[topic]))
    for cut in range(len(raw)):
        with pytest.raises(MalformedRequestError) as info:
            decode_request(raw[:cut])
        if cut >= 8:
            assert info.value.correlation_id == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        struct.pack(">hhi", 3, 12, 1),
        struct.pack(">hhih", 3, 12, 1, 5) + b"\xff\xfe\xfd\xfc\xfb",  # client id not UTF-8
        struct.pack(">hhih", 3, 12, 1, 100) + b"short",
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\xff" * 10,  # absurd array length
    ],
)
def test_garbage_is_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        decode_request(raw)


def test_all_refusals_are_request_errors() -> None:
    assert issubclass(MalformedRequestError, RequestError)
    assert issubclass(UnsupportedVersionError, RequestError)
    assert issubclass(UnknownApiKeyError, RequestError)


# --- buffers, client side, caching -----------------------------------------------------------


def test_writable_buffers_are_accepted() -> None:
    raw = kp_encode(MetadataRequest[4](topics=None), correlation_id=21)
    assert decode_request(bytearray(raw)).correlation_id == 21
    assert decode_request(memoryview(bytearray(raw))).correlation_id == 21
    assert decode_request(memoryview(b"xx" + raw)[2:]).correlation_id == 21


def test_encode_request_matches_kafka_python() -> None:
    framed = encode_request(
        KioMetadataRequestV12(topics=None, include_topic_authorized_operations=False),
        17,
        client_id="kp",
    )
    assert framed[4:] == kp_encode(MetadataRequest[12](topics=None), 17, client_id="kp")
    assert decode_request(framed[4:]).correlation_id == 17


def test_decode_response_errors() -> None:
    reference = KP_RESPONSES[3][12]()
    reference.with_header(correlation_id=1)
    raw = bytes(reference.encode(header=True))
    assert decode_response(raw + b"\x00", 3, 12) == decode_response(raw, 3, 12)
    with pytest.raises(MalformedResponseError):
        decode_response(raw[:-3], 3, 12)
    with pytest.raises(MalformedResponseError):
        decode_response(raw, 3, 99)


def test_warm_codecs_counts_every_pair() -> None:
    assert warm_codecs() == len(SUPPORTED_PAIRS)


@pytest.mark.parametrize(("api_key", "version"), INTER_BROKER_VERSIONS)
def test_inter_broker_requests_decode_from_kio(api_key: int, version: int) -> None:
    from kio.index import load_request_schema

    from tierlog.protocol.kio_build import build

    body = build(load_request_schema(api_key, version), INTER_BROKER_SAMPLES[api_key])
    frame = encode_request(body, 41, client_id="broker-1")
    request = decode_request(frame[4:])
    assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, 41)
    assert request.body == body
