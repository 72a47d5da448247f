"""Errors of the local tier; the broker maps each onto one Kafka error code."""

from __future__ import annotations

# The size limits are checked with the rest of a batch (``tierlog.records.validate``);
# their errors live there and are named here too, where callers of the log look.
from tierlog.records.errors import RecordBatchTooLargeError, RecordTooLargeError

__all__ = [
    "CorruptSegmentError",
    "DiskFullError",
    "LogClosedError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
]


class LogError(Exception):
    """Base class for local-tier failures."""


class OffsetOutOfRangeError(LogError):
    """Requested offset is below the log start or above the log end (code 1)."""

    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside the log range [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class LogClosedError(LogError):
    """The log was closed or deleted while in use (KAFKA_STORAGE_ERROR, code 56)."""


class CorruptSegmentError(LogError):
    """Bytes on disk that cannot be read as the batches they should be: a length field
    pointing past the segment's end, a header that does not parse, or a range the
    scrubber found failing its CRC-32C (KAFKA_STORAGE_ERROR, code 56).

    Kafka answers CORRUPT_MESSAGE for a corrupt read, which librdkafka treats as fatal for
    the partition; KAFKA_STORAGE_ERROR is retriable, so consumers wait at the damaged
    offset (for a repair or an operator) instead of skipping past it or giving up.
    ``code`` is read by the broker's error mapping, so this module needs no broker import.
    """

    code = 56

    def __init__(self, message: str, path: object = None, position: int = -1) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class DiskFullError(LogError):
    """A log dir's disk filled up while the broker started: loading writes (checkpoints,
    the leader-epoch checkpoint of a log whose history was cut, preallocated indexes), and
    without them the state the broker would serve from is not on disk. The message is one
    line naming the dir and the way out; ``tierlog broker start`` prints it as such (issue
    10, item 10)."""
