"""Exceptions mapped onto the Kafka error codes answered for them: the broker's one map.

It sits below everything in the broker that raises or answers (handlers, coordinators,
replication), so all of them import it downward, and it imports only the sans-I/O error
vocabularies beneath the broker (records, local, protocol). An exception that knows its
Kafka error code carries it as ``code`` (``PartitionError``, ``TopicError``, the remote
tier's ``RemoteStorageError``, ``CorruptSegmentError``), so this map needs no import of
the module that raises it; the table below is for the rest. (Below the broker the code is
a number with its name beside it: importing kio's ``ErrorCode`` costs about a second,
which Spark executors and the cleaner's worker processes would pay;
``tests/broker/test_errors.py`` pins each to its name.)
"""

from __future__ import annotations

import logging

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

log = logging.getLogger(__name__)

_BY_TYPE: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    # A read timed out (the remote tier's, off the event loop): retriable, so clients
    # wait for the data instead of skipping it.
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
    if isinstance(code, int):
        return int(code)
    for kind, mapped in _BY_TYPE:
        if isinstance(exc, kind):
            if kind is OSError:
                log.error("storage error: %s", exc)
            return int(mapped)
    log.exception("unexpected error while handling a request", exc_info=exc)
    return int(ErrorCode.unknown_server_error)
