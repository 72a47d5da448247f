"""The Kafka v2 record batch header: parse, validate and rewrite it, without decoding records.

This module owns the 61-byte header layout and nothing else; it is sans-I/O (bytes in,
values out). Byte format (big-endian, offsets in bytes):

    0  baseOffset            int64   rewritten by the log on append (outside the CRC)
    8  batchLength           int32   bytes after this field = total size - 12
   12  partitionLeaderEpoch  int32   rewritten by the log on append (outside the CRC)
   16  magic                 int8    always 2
   17  crc                   uint32  CRC-32C of bytes 21..end
   21  attributes            int16   bits 0-2 codec, 3 timestampType, 4 transactional,
                                     5 control, 6 deleteHorizon (KIP-534)
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordCount           int32
   61  records ...           one compressed block when a codec is set

The broker's hot path (append, recovery, fetch bounds) only ever looks at this header; see
DESIGN.md principle 2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from tierlog.records.errors import CorruptBatchError, UnsupportedMagicError

HEADER_SIZE = 61
# Bytes before batchLength's payload starts: baseOffset + batchLength.
LOG_OVERHEAD = 12
MAGIC_V2 = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
# The smallest well-formed batch is a header with no records.
MIN_BATCH_SIZE = HEADER_SIZE

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: enough to walk a buffer
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")


class Compression(IntEnum):
    """Attribute bits 0-2: the codec of the records block."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3, as Spark's Kafka source reports it (0 create, 1 log append)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class Attr:
    """Bit masks of the attributes field."""

    COMPRESSION_MASK = 0x07
    TIMESTAMP_TYPE = 0x08
    TRANSACTIONAL = 0x10
    CONTROL = 0x20
    DELETE_HORIZON = 0x40


class BatchHeader(NamedTuple):
    """The decoded 61-byte header of one v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on disk and on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & Attr.COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & Attr.TIMESTAMP_TYPE else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & Attr.TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & Attr.CONTROL)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps at int32 like Kafka's DefaultRecordBatch."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header at ``buf[pos:]``; checks magic and length, not the CRC.

    Raises:
        CorruptBatchError: fewer than 61 bytes, or a batchLength too small for a header.
        UnsupportedMagicError: magic other than 2 (v0/v1 message sets are not accepted).
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"batch header truncated: {len(buf) - pos} of {HEADER_SIZE} bytes")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise UnsupportedMagicError(f"record batch magic {header.magic}, only v2 is supported")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batchLength {header.batch_length} is smaller than a header")
    return header


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over attributes..end, the range Kafka's v2 CRC covers."""
    return int(crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def validate_batch(batch: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the batch at ``batch[pos:]`` and check that it is whole and its CRC matches.

    Raises:
        CorruptBatchError: truncated batch, inconsistent counts or CRC mismatch.
        UnsupportedMagicError: magic other than 2.
    """
    header = parse_header(batch, pos)
    end = pos + header.size
    if end > len(batch):
        raise CorruptBatchError(
            f"batch at offset {header.base_offset} truncated: {len(batch) - pos} of "
            f"{header.size} bytes"
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptBatchError(
            f"batch at offset {header.base_offset} has negative lastOffsetDelta/recordCount"
        )
    actual = int(crc32c(memoryview(batch)[pos + ATTRIBUTES_OFFSET : end]))
    if actual != header.crc:
        raise CorruptBatchError(
            f"batch at offset {header.base_offset}: CRC-32C {actual:#010x} does not match "
            f"stored {header.crc:#010x}"
        )
    return header


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each validated batch in a buffer of whole batches.

    Raises:
        CorruptBatchError: a batch is malformed, truncated or fails its CRC; nothing after
            it is yielded.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate_batch(buf, pos)
        yield pos, header
        pos += header.size


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """Return ``(base_offset, total_size)`` of the batch at ``pos``, or None if < 12 bytes."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    base_offset, length = _PREFIX.unpack_from(buf, pos)
    return base_offset, length + LOG_OVERHEAD


def rewrite_prefix(
    batch: bytes | bytearray | memoryview, base_offset: int, partition_leader_epoch: int
) -> bytes:
    """Return the first 17 bytes of ``batch`` with baseOffset and partitionLeaderEpoch set.

    Both fields lie outside the CRC, so the log can write this prefix followed by
    ``batch[17:]`` unchanged (one ``writev``, no copy of the records).
    """
    prefix = bytearray(batch[: MAGIC_OFFSET + 1])
    _BASE_OFFSET.pack_into(prefix, 0, base_offset)
    _LEADER_EPOCH.pack_into(prefix, 12, partition_leader_epoch)
    return bytes(prefix)


def set_log_append_time(batch: bytearray, pos: int, timestamp: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime with maxTimestamp ``timestamp``, in place.

    Both fields are inside the CRC, so the CRC is recomputed, as Kafka does for topics with
    message.timestamp.type=LogAppendTime.
    """
    header = parse_header(batch, pos)
    end = pos + header.size
    struct.pack_into(">h", batch, pos + ATTRIBUTES_OFFSET, header.attributes | Attr.TIMESTAMP_TYPE)
    struct.pack_into(">q", batch, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    crc = int(crc32c(memoryview(batch)[pos + ATTRIBUTES_OFFSET : end]))
    struct.pack_into(">I", batch, pos + CRC_OFFSET, crc)
