"""Exceptions from the lower layers mapped onto the Kafka error codes answered for them."""

from __future__ import annotations

import logging

from tierlog.broker.partition import PartitionError
from tierlog.broker.replica_manager import TopicError
from tierlog.local.errors import (
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.records.errors import (
    CorruptBatchError,
    InvalidRecordError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from tierlog.remote.api import RemoteStorageError

log = logging.getLogger(__name__)

_BY_TYPE: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    # The remote tier could not answer (store down, object missing, read timed out):
    # retriable, so clients wait for the data instead of skipping it.
    (RemoteStorageError, ErrorCode.kafka_storage_error),
    (TimeoutError, ErrorCode.kafka_storage_error),
    (UnsupportedMagicError, ErrorCode.unsupported_for_message_format),
    (CorruptBatchError, ErrorCode.corrupt_message),
    (InvalidRecordError, ErrorCode.invalid_record),
    (UnsupportedCompressionError, ErrorCode.unsupported_compression_type),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (RecordBatchTooLargeError, ErrorCode.record_list_too_large),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (LogClosedError, ErrorCode.kafka_storage_error),
    (OSError, ErrorCode.kafka_storage_error),
)


def error_code(exc: BaseException) -> int:
    """The Kafka error code for ``exc``; unexpected ones are logged and answered with
    UNKNOWN_SERVER_ERROR rather than taking the connection down."""
    code = getattr(exc, "code", None)
    if isinstance(exc, PartitionError | TopicError) or isinstance(code, int):
        return int(code)  # type: ignore[arg-type]
    for kind, mapped in _BY_TYPE:
        if isinstance(exc, kind):
            if kind is OSError:
                log.error("storage error: %s", exc)
            return int(mapped)
    log.exception("unexpected error while handling a request", exc_info=exc)
    return int(ErrorCode.unknown_server_error)
