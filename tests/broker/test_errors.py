"""The broker's one exception -> Kafka error code map (tierlog/broker/errors.py): each
layer's errors answer their Kafka code, by name; a bug answers UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

import pytest

from tierlog.broker.errors import error_code
from tierlog.broker.replication.partition import PartitionError
from tierlog.broker.replication.topic_error import TopicError
from tierlog.local.errors import (
    CorruptSegmentError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.records.errors import (
    CorruptBatchError,
    DecompressedTooLargeError,
    InvalidRecordError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    RemoteDataLostError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageUnavailableError,
)

E = ErrorCode


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (PartitionError(E.not_leader_or_follower, "moved"), E.not_leader_or_follower),
        (TopicError(E.topic_already_exists, "there"), E.topic_already_exists),
        # Below the broker a code is a number (kio's table costs a second to import):
        # these pin each number to its name.
        (RemoteStorageError("down"), E.kafka_storage_error),
        (RemoteStorageUnavailableError("down"), E.kafka_storage_error),
        (RemoteResourceNotFoundError("gone"), E.kafka_storage_error),
        (RemoteDataLostError("emptied"), E.kafka_storage_error),
        (CorruptManifestError("s3://b/t-0/manifest.json", "bad"), E.kafka_storage_error),
        (FencedLeaderEpochError("old", stored_epoch=2, writer_epoch=1), E.kafka_storage_error),
        (CorruptSegmentError("bad bytes"), E.kafka_storage_error),
        (DecompressedTooLargeError("huge"), E.message_too_large),
        (TimeoutError(), E.kafka_storage_error),
        (UnsupportedMagicError("magic 1"), E.unsupported_for_message_format),
        (CorruptBatchError("crc"), E.corrupt_message),
        (InvalidRecordError("key"), E.invalid_record),
        (UnsupportedCompressionError("codec 7"), E.unsupported_compression_type),
        (RecordTooLargeError("big"), E.message_too_large),
        (RecordBatchTooLargeError("bigger"), E.record_list_too_large),
        (OffsetOutOfRangeError(9, 0, 5), E.offset_out_of_range),
        (LogClosedError("closed"), E.kafka_storage_error),
        (OSError("disk"), E.kafka_storage_error),
        (RuntimeError("a bug"), E.unknown_server_error),
    ],
)
def test_each_error_answers_its_kafka_code(exc: BaseException, code: ErrorCode) -> None:
    assert error_code(exc) == code
