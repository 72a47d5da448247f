"""The SUPPORTED table and the ApiVersions answer built from it."""

from __future__ import annotations

import datetime

import pytest
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

from tierlog.protocol import (
    ADVERTISED,
    SUPPORTED,
    ApiKey,
    ErrorCode,
    api_versions_response,
    is_supported,
)

# What each client asks for (kafka-wire.md): every one must fall inside SUPPORTED.
CLIENT_VERSIONS = {
    "kafka-python": {18: 4, 3: 13, 0: 9, 22: 4, 10: 6, 11: 7, 14: 5, 12: 4, 13: 5, 9: 8, 8: 8,
                     2: 11, 1: 12, 19: 7},
    "librdkafka": {18: 3, 3: 13, 0: 10, 22: 4, 10: 2, 11: 5, 14: 3, 12: 3, 13: 1, 9: 9, 8: 9,
                   2: 7, 1: 16, 19: 4},
    "aiokafka": {18: 0, 3: 5, 0: 7, 10: 1, 11: 5, 14: 3, 12: 1, 13: 1, 9: 3, 8: 3, 2: 3,
                 1: 11, 19: 3},
}  # fmt: skip

# First flexible version per API (kafka-wire.md).
FIRST_FLEXIBLE = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4,
                  18: 3, 19: 5, 22: 2, 23: 4}  # fmt: skip

# 35: DescribeLogDirs; 43, 45, 46: ElectLeaders and partition reassignments (operators ->
# controller);
# 56: AlterPartition (leaders -> controller);
# 24-28, 61, 65, 66: transactions (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
# WriteTxnMarkers, TxnOffsetCommit; DescribeProducers, DescribeTransactions,
# ListTransactions); 47: OffsetDelete; 48, 49: Describe/AlterClientQuotas;
# 29-31: Describe/Create/DeleteAcls; 50, 51: Describe/AlterUserScramCredentials;
# 34: AlterReplicaLogDirs; 60: DescribeCluster; 68, 69: ConsumerGroupHeartbeat and
# ConsumerGroupDescribe (KIP-848); 71, 72: client metrics (KIP-714); 74: ListConfigResources;
# 75: DescribeTopicPartitions.
BRIEF_KEYS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
              25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 42, 43, 44, 45, 46, 47, 48,
              49, 50, 51, 56, 60, 61, 65, 66, 68, 69, 71, 72, 74, 75}  # fmt: skip


def test_table_has_exactly_the_broker_apis() -> None:
    assert set(SUPPORTED) == BRIEF_KEYS
    assert {int(k) for k in ApiKey} == BRIEF_KEYS


@pytest.mark.parametrize("api_key", sorted(BRIEF_KEYS))
def test_every_supported_version_has_kio_schemas(api_key: int) -> None:
    low, high = SUPPORTED[api_key]
    assert 0 <= low <= high
    versions = schema_name_map[api_key_map[api_key]]
    assert low >= min(versions)
    assert high <= max(versions)
    for version in range(low, high + 1):
        assert load_request_schema(api_key, version).__version__ == version
        assert load_response_schema(api_key, version).__version__ == version


def test_record_batch_v2_minimums() -> None:
    assert SUPPORTED[ApiKey.PRODUCE][0] == 3
    assert SUPPORTED[ApiKey.FETCH][0] == 4


def test_versions_we_cannot_honour_are_left_out() -> None:
    assert SUPPORTED[ApiKey.PRODUCE][1] == 11  # v12: transactions v2
    assert SUPPORTED[ApiKey.FETCH][1] == 16  # v17/v18: KRaft only
    assert SUPPORTED[ApiKey.INIT_PRODUCER_ID][1] == 5  # v6: two-phase commit


@pytest.mark.parametrize("client", sorted(CLIENT_VERSIONS))
def test_clients_versions_are_inside_the_table(client: str) -> None:
    for api_key, version in CLIENT_VERSIONS[client].items():
        assert is_supported(api_key, version), (client, api_key, version)


@pytest.mark.parametrize("api_key", sorted(FIRST_FLEXIBLE))
def test_flexible_boundaries_match_kio(api_key: int) -> None:
    low, high = SUPPORTED[api_key]
    for version in range(low, high + 1):
        flexible = load_request_schema(api_key, version).__flexible__
        assert flexible == (version >= FIRST_FLEXIBLE[api_key]), (api_key, version)


def test_is_supported_edges() -> None:
    assert is_supported(0, 3) and is_supported(0, 11)
    assert not is_supported(0, 2) and not is_supported(0, 12)
    assert is_supported(17, 1) and not is_supported(17, 2)  # SaslHandshake v0-v1
    assert not is_supported(4, 0)  # LeaderAndIsr: removed in Kafka 4
    assert not is_supported(18, -1)


def test_advertised_differs_only_by_produce_v0() -> None:
    assert ADVERTISED[ApiKey.PRODUCE] == (0, SUPPORTED[ApiKey.PRODUCE][1])
    assert {k: v for k, v in ADVERTISED.items() if k != ApiKey.PRODUCE} == {
        k: v for k, v in SUPPORTED.items() if k != ApiKey.PRODUCE
    }


def test_librdkafka_feature_gates_are_met() -> None:
    # librdkafka enables a feature when these ranges overlap what the broker advertises.
    # Before 2.11.1 each range was a single version (KAFKA-18659): MsgVer1 needs Produce 2.
    def overlaps(api_key: int, low: int, high: int) -> bool:
        b_low, b_high = ADVERTISED[api_key]
        return low <= b_high and b_low <= high

    assert overlaps(ApiKey.PRODUCE, 2, 2)  # MsgVer1 (old librdkafka)
    assert overlaps(ApiKey.PRODUCE, 3, 3) and overlaps(ApiKey.FETCH, 4, 4)  # MsgVer2
    assert overlaps(ApiKey.PRODUCE, 7, 7) and overlaps(ApiKey.FETCH, 10, 10)  # ZSTD
    assert overlaps(ApiKey.INIT_PRODUCER_ID, 0, 0)  # IdempotentProducer
    assert overlaps(ApiKey.FIND_COORDINATOR, 0, 0)  # group coordinator, LZ4
    assert overlaps(ApiKey.OFFSET_COMMIT, 1, 2) and overlaps(ApiKey.OFFSET_FETCH, 1, 1)
    assert overlaps(ApiKey.LIST_OFFSETS, 1, 1)  # OffsetTime


def test_kafka_python_infers_a_modern_broker() -> None:
    data = BrokerVersionData(api_versions=dict(ADVERTISED))
    assert data.broker_version >= (4, 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_lists_the_table(version: int) -> None:
    body = api_versions_response(version)
    assert body.__version__ == version
    assert body.error_code == ErrorCode.none
    listed = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert listed == dict(ADVERTISED)
    assert [k.api_key for k in body.api_keys] == sorted(ADVERTISED)


def test_api_versions_throttle() -> None:
    body = api_versions_response(3, throttle_time_ms=250)
    assert body.throttle_time == datetime.timedelta(milliseconds=250)  # type: ignore[union-attr]
    assert api_versions_response(1).throttle_time == datetime.timedelta(0)  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [5, 99, -1, 32767])
def test_unknown_api_versions_version_gets_v0_and_error_35(version: int) -> None:
    body = api_versions_response(version)
    assert body.__version__ == 0
    assert body.error_code == ErrorCode.unsupported_version == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == dict(ADVERTISED)


def test_kafka_python_reads_our_answer() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from tierlog.protocol import decode_request, encode_request, encode_response

    request = decode_request(
        encode_request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
        )[4:]
    )
    raw = encode_response(request, api_versions_response(3))
    parsed = KpApiVersionsResponse[3].decode(raw[4:], header=True)
    assert parsed.header.correlation_id == 3
    assert parsed.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in parsed.api_keys}
    assert got == dict(ADVERTISED)
