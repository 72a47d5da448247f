"""Build complete Kafka v2 record batches (data and transaction control batches) as bytes.

This module owns the per-record byte format; the 61-byte header layout lives in
``tierlog.records.header``. One record, before compression (lengths are zigzag
varints, see ``tierlog.records.varint``)::

    length          varint   bytes of the record after this field
    attributes      int8     unused, always 0
    timestampDelta  varlong  record timestamp - batch baseTimestamp
    offsetDelta     varint   record offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headersCount    varint
    per header:     keyLength varint + UTF-8 key, valueLength varint (-1 null) + value

Control batches (KIP-98) hold one record whose key is int16 version (0) + int16 type
(0 abort, 1 commit) and whose value is int16 version (0) + int32 coordinator epoch.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from tierlog.records.codecs import compress
from tierlog.records.header import (
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Attr,
    Compression,
    TimestampType,
    compute_crc,
)
from tierlog.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    encode_varint,
    encode_varlong,
)

# Same layout as header.BatchHeader (see the table in tierlog.records.header).
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_NULL = encode_varint(-1)
_ZERO_ATTRIBUTES = b"\x00"
_NO_HEADERS = encode_varint(0)
CONTROL_RECORD_VERSION = 0

Headers = tuple[tuple[str, bytes | None], ...]


class ControlType(IntEnum):
    """The type field of a control record's key (KIP-98 transaction markers)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record to write; ``timestamp`` None means the batch's base timestamp."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name}={value} outside [{low}, {high}]")


def _encode_record(
    out: list[bytes], record: Record, timestamp_delta: int, offset_delta: int
) -> None:
    """Append the wire bytes of one record to ``out`` (length prefix first)."""
    parts = [_ZERO_ATTRIBUTES, encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    key = record.key
    if key is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    value = record.value
    if value is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    headers = record.headers
    if not headers:
        parts.append(_NO_HEADERS)
    else:
        parts.append(encode_varint(len(headers)))
        for h_key, h_value in headers:
            if not isinstance(h_key, str):
                raise TypeError(f"header key must be str, not {type(h_key).__name__}")
            raw_key = h_key.encode("utf-8")
            parts.append(encode_varint(len(raw_key)))
            parts.append(raw_key)
            if h_value is None:
                parts.append(_NULL)
            else:
                parts.append(encode_varint(len(h_value)))
                parts.append(h_value)
    body = b"".join(parts)
    out.append(encode_varint(len(body)))
    out.append(body)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Encode ``records`` as one complete v2 batch, CRC included.

    Args:
        records: at least one record.
        base_offset: offset of the first record (a producer sends 0; the log rewrites it).
        compression: codec of the records block.
        timestamp_type: attribute bit 3. For LOG_APPEND_TIME pass the broker's append
            time as ``base_timestamp``: it becomes maxTimestamp, which readers report for
            every record (Kafka's MemoryRecordsBuilder does the same).
        producer_id, producer_epoch, base_sequence: idempotence fields (KIP-98).
        transactional, control: attribute bits 4 and 5.
        partition_leader_epoch: stored outside the CRC; the log rewrites it on append.
        base_timestamp: the batch's baseTimestamp. None takes the first record timestamp
            that is set, as the Java and Python producers do, or -1 (NO_TIMESTAMP).
        offset_deltas: per-record offsetDelta, strictly increasing from >= 0. The log
            cleaner passes these to keep compacted records' original offsets; the
            default is 0..n-1.

    Returns:
        The batch bytes.

    Raises:
        ValueError: no records, a field out of its wire range, or bad offset_deltas.
        TypeError: a header key that is not a str.
        UnsupportedCompressionError: the codec's library is missing.
    """
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX)
    _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX)
    _check_range("producer_epoch", producer_epoch, -(1 << 15), (1 << 15) - 1)
    _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX)

    if offset_deltas is None:
        deltas: Sequence[int] = range(count)
    else:
        if len(offset_deltas) != count:
            raise ValueError(f"{len(offset_deltas)} offset_deltas for {count} records")
        previous = -1
        for delta in offset_deltas:
            if delta <= previous:
                raise ValueError("offset_deltas must be strictly increasing from >= 0")
            previous = delta
        _check_range("last offset delta", previous, 0, INT32_MAX)
        deltas = offset_deltas

    explicit_base = base_timestamp is not None
    if base_timestamp is None:
        base_timestamp = next(
            (r.timestamp for r in records if r.timestamp is not None), NO_TIMESTAMP
        )
    _check_range("base_timestamp", base_timestamp, INT64_MIN, INT64_MAX)

    parts: list[bytes] = []
    max_timestamp = INT64_MIN
    for record, delta in zip(records, deltas, strict=True):
        timestamp = record.timestamp
        if timestamp is None:
            timestamp = base_timestamp
        elif not INT64_MIN <= timestamp <= INT64_MAX:
            raise ValueError(f"record timestamp {timestamp} outside int64")
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        # encode_varlong range-checks the delta (timestamps far apart can overflow it).
        _encode_record(parts, record, timestamp - base_timestamp, delta)
    if timestamp_type == TimestampType.LOG_APPEND_TIME and explicit_base:
        max_timestamp = base_timestamp
    body = b"".join(parts)
    if compression != Compression.NONE:
        body = compress(compression, body)

    attributes = int(compression) & Attr.COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= Attr.TIMESTAMP_TYPE
    if transactional:
        attributes |= Attr.TRANSACTIONAL
    if control:
        attributes |= Attr.CONTROL

    total = HEADER_SIZE + len(body)
    if total - LOG_OVERHEAD > INT32_MAX:
        raise ValueError(f"batch of {total} bytes does not fit batchLength (int32)")
    batch = bytearray(total)
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        total - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,  # CRC, filled in below once the covered bytes are final
        attributes,
        deltas[-1],
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    batch[HEADER_SIZE:] = body
    _CRC.pack_into(batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def build_control_batch(
    kind: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    coordinator_epoch: int = 0,
) -> bytes:
    """Encode a transaction marker: a transactional control batch with one record.

    Raises:
        ValueError: a field out of its wire range.
    """
    _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX)
    record = Record(
        key=_CONTROL_KEY.pack(CONTROL_RECORD_VERSION, int(ControlType(kind))),
        value=_CONTROL_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch),
        timestamp=timestamp,
    )
    # Markers carry no sequence number (Kafka writes NO_SEQUENCE for them).
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp,
    )
