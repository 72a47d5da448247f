"""Kafka error codes the broker relies on, and the exception tree."""

from __future__ import annotations

import pytest

from tierlog.protocol import (
    ErrorCode,
    FrameError,
    FrameTooLargeError,
    MalformedFrameError,
    MalformedRequestError,
    MalformedResponseError,
    ProtocolError,
    RequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)

# Kafka's names and values (org.apache.kafka.common.protocol.Errors).
CODES = {
    "UNKNOWN_SERVER_ERROR": -1, "NONE": 0, "OFFSET_OUT_OF_RANGE": 1, "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3, "INVALID_FETCH_SIZE": 4, "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6, "REQUEST_TIMED_OUT": 7, "MESSAGE_TOO_LARGE": 10,
    "COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16,
    "INVALID_TOPIC_EXCEPTION": 17, "RECORD_LIST_TOO_LARGE": 18, "NOT_ENOUGH_REPLICAS": 19,
    "ILLEGAL_GENERATION": 22, "INCONSISTENT_GROUP_PROTOCOL": 23, "INVALID_GROUP_ID": 24,
    "UNKNOWN_MEMBER_ID": 25, "INVALID_SESSION_TIMEOUT": 26, "REBALANCE_IN_PROGRESS": 27,
    "INVALID_COMMIT_OFFSET_SIZE": 28, "TOPIC_AUTHORIZATION_FAILED": 29, "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36, "INVALID_PARTITIONS": 37, "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_CONFIG": 40, "NOT_CONTROLLER": 41, "INVALID_REQUEST": 42,
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": 43, "POLICY_VIOLATION": 44,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45, "DUPLICATE_SEQUENCE_NUMBER": 46,
    "INVALID_PRODUCER_EPOCH": 47, "KAFKA_STORAGE_ERROR": 56, "UNKNOWN_PRODUCER_ID": 59,
    "NON_EMPTY_GROUP": 68, "GROUP_ID_NOT_FOUND": 69, "FETCH_SESSION_ID_NOT_FOUND": 70,
    "FENCED_LEADER_EPOCH": 74, "UNKNOWN_LEADER_EPOCH": 75, "UNSUPPORTED_COMPRESSION_TYPE": 76,
    "OFFSET_NOT_AVAILABLE": 78, "MEMBER_ID_REQUIRED": 79, "GROUP_MAX_SIZE_REACHED": 81,
    "FENCED_INSTANCE_ID": 82, "INVALID_RECORD": 87, "UNSTABLE_OFFSET_COMMIT": 88,
    "THROTTLING_QUOTA_EXCEEDED": 89, "UNKNOWN_TOPIC_ID": 100, "INCONSISTENT_TOPIC_ID": 103,
}  # fmt: skip


@pytest.mark.parametrize(("name", "value"), sorted(CODES.items()))
def test_error_code(name: str, value: int) -> None:
    code = ErrorCode[name.lower()]
    assert code == value
    assert ErrorCode(value) is code


def test_retriable_flags_follow_kafka() -> None:
    assert ErrorCode.not_leader_or_follower.retriable
    assert ErrorCode.unknown_topic_or_partition.retriable
    assert ErrorCode.not_coordinator.retriable
    assert not ErrorCode.offset_out_of_range.retriable
    assert not ErrorCode.unsupported_version.retriable


def test_exception_tree() -> None:
    for exc in (FrameTooLargeError, MalformedFrameError):
        assert issubclass(exc, FrameError)
    for exc in (UnknownApiKeyError, UnsupportedVersionError, MalformedRequestError):
        assert issubclass(exc, RequestError)
    for exc in (FrameError, RequestError, MalformedResponseError):
        assert issubclass(exc, ProtocolError)
    err = UnsupportedVersionError(1, 99, 7)
    assert (err.api_key, err.api_version, err.correlation_id) == (1, 99, 7)
    assert "99" in str(err)
    assert MalformedRequestError("x").correlation_id is None
