"""Errors raised by the record codecs; each maps onto one Kafka error code at the broker."""

from __future__ import annotations


class RecordsError(ValueError):
    """Base class: the bytes are not a valid Kafka v2 record batch."""


class CorruptBatchError(RecordsError):
    """Truncated, inconsistent or CRC-failing batch (Kafka CORRUPT_MESSAGE, code 2)."""


class UnsupportedMagicError(CorruptBatchError):
    """Magic other than 2 (Kafka UNSUPPORTED_FOR_MESSAGE_FORMAT, code 43)."""


class InvalidRecordError(RecordsError):
    """A well-formed batch whose records break a rule (Kafka INVALID_RECORD, code 87)."""


class UnsupportedCompressionError(RecordsError):
    """Codec bits name no known codec (Kafka UNSUPPORTED_COMPRESSION_TYPE, code 76)."""


class DecompressedTooLargeError(CorruptBatchError):
    """A compressed batch that decompresses (or says it does) to more than a reader or a
    check is allowed to produce (Kafka MESSAGE_TOO_LARGE, code 10; ``code`` is read by
    the broker's error mapping)."""

    code = 10


class RecordTooLargeError(RecordsError):
    """A batch larger than ``max.message.bytes`` (Kafka MESSAGE_TOO_LARGE, code 10)."""

    code = 10


class RecordBatchTooLargeError(RecordsError):
    """An append larger than a whole segment, ``segment.bytes`` (Kafka
    RECORD_LIST_TOO_LARGE, code 18)."""

    code = 18
