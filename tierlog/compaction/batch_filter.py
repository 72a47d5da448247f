"""Filtering the records of one v2 batch: what the log cleaner rewrites, sans-I/O.

``walk_records`` finds each record of a batch (decompressing its block when a codec is
set) without decoding more than the cleaner needs: where the record's bytes are, its
offset and timestamp deltas, its key, and whether its value is null (a tombstone).
``rebuild_batch`` writes a batch holding a subset of those records, and ``empty_batch``
one holding none.

What a rebuilt batch keeps (Kafka's ``MemoryRecords.filterTo``): the base offset and
lastOffsetDelta of the original (offsets never change, and the producer's last sequence,
baseSequence + lastOffsetDelta, stays right for idempotence), its codec, producer id,
epoch, base sequence, partition leader epoch, timestamp type, transactional and control
bits. Kept records are copied byte for byte: their deltas stay valid against the same
base offset and base timestamp. Only a batch that gets a delete horizon (KIP-534: the time
after which its tombstones may be removed, stored as its baseTimestamp with attribute bit
6 set) has its records' timestamp deltas re-encoded against the new base, which keeps
every record's own timestamp. maxTimestamp becomes the max of the kept records, as
Kafka's builder computes it (LogAppendTime batches keep theirs).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

from tierlog.records.codecs import compress
from tierlog.records.errors import CorruptBatchError
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    Attr,
    BatchHeader,
    compute_crc,
)
from tierlog.records.reader import records_block
from tierlog.records.varint import (
    ZIGZAG_1,
    ZIGZAG_2,
    BytesLike,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class BatchRecords:
    """The records of one batch, as positions into ``data`` (its records block)."""

    data: BytesLike
    starts: list[int]  # each record's length varint
    attrs: list[int]  # each record's attributes byte (its body starts here)
    rests: list[int]  # just after offsetDelta: keyLength, key, value, headers follow
    ends: list[int]
    offset_deltas: list[int]
    timestamp_deltas: list[int]
    keys: list[bytes | None]
    tombstones: list[bool]

    def __len__(self) -> int:
        return len(self.starts)


def _varint(data: BytesLike, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return ZIGZAG_1[b], pos + 1
    b2 = data[pos + 1]
    if b2 < 0x80:
        return ZIGZAG_2[(b & 0x7F) | (b2 << 7)], pos + 2
    return decode_varint(data, pos)


def walk_records(batch: BytesLike, header: BatchHeader) -> BatchRecords:
    """Locate the records of the batch ``batch`` (its whole bytes, header first).

    Raises:
        CorruptBatchError: a record does not fit the block, or the count is wrong.
    """
    data, pos, end = records_block(batch, 0, header)
    out = BatchRecords(data, [], [], [], [], [], [], [], [])
    count = header.record_count
    try:
        for _ in range(count):
            start = pos
            length, pos = _varint(data, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise CorruptBatchError(
                    f"batch at offset {header.base_offset}: record length {length} does not "
                    "fit its block"
                )
            attr = pos
            b = data[pos + 1]
            if b < 0x80:
                ts_delta, pos = ZIGZAG_1[b], pos + 2
            else:
                ts_delta, pos = decode_varlong(data, pos + 1)
            offset_delta, pos = _varint(data, pos)
            rest = pos
            key_len, pos = _varint(data, pos)
            key: bytes | None = None
            if key_len >= 0:
                key = bytes(data[pos : pos + key_len])
                pos += key_len
            value_len, pos = _varint(data, pos)
            if pos > rec_end:
                raise CorruptBatchError(
                    f"batch at offset {header.base_offset}: a record's key overruns it"
                )
            out.starts.append(start)
            out.attrs.append(attr)
            out.rests.append(rest)
            out.ends.append(rec_end)
            out.offset_deltas.append(offset_delta)
            out.timestamp_deltas.append(ts_delta)
            out.keys.append(key)
            out.tombstones.append(value_len < 0)
            pos = rec_end
    except IndexError:
        raise CorruptBatchError(
            f"batch at offset {header.base_offset}: records truncated (it declares {count})"
        ) from None
    if pos != end:
        raise CorruptBatchError(
            f"batch at offset {header.base_offset}: {end - pos} bytes after its {count} records"
        )
    return out


def _header_bytes(
    header: BatchHeader,
    body_size: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
) -> bytearray:
    batch = bytearray(HEADER_SIZE + body_size)
    _HEADER.pack_into(
        batch,
        0,
        header.base_offset,
        HEADER_SIZE + body_size - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        record_count,
    )
    return batch


def rebuild_batch(
    header: BatchHeader,
    records: BatchRecords,
    keep: Sequence[int],
    delete_horizon_ms: int | None = None,
) -> bytes:
    """A batch like ``header``'s with only the records at indexes ``keep`` (at least one).

    ``delete_horizon_ms`` sets the batch's delete horizon (KIP-534); None keeps the
    original's base timestamp and horizon bit.
    """
    data = records.data
    base_ts = header.base_timestamp
    attributes = header.attributes
    parts: list[bytes | BytesLike] = []
    max_ts = -1
    deltas = records.timestamp_deltas
    if delete_horizon_ms is None:
        for i in keep:
            parts.append(data[records.starts[i] : records.ends[i]])
            ts = base_ts + deltas[i]
            if ts > max_ts:
                max_ts = ts
        new_base = base_ts
    else:
        new_base = delete_horizon_ms
        attributes |= Attr.DELETE_HORIZON
        for i in keep:
            ts = base_ts + deltas[i]
            if ts > max_ts:
                max_ts = ts
            body = b"".join(
                (
                    bytes(data[records.attrs[i] : records.attrs[i] + 1]),
                    encode_varlong(ts - new_base),
                    encode_varint(records.offset_deltas[i]),
                    bytes(data[records.rests[i] : records.ends[i]]),
                )
            )
            parts.append(encode_varint(len(body)))
            parts.append(body)
    if attributes & Attr.TIMESTAMP_TYPE:
        max_ts = header.max_timestamp  # LogAppendTime: the broker's time, for every record
    block: bytes = b"".join(parts)
    codec = attributes & Attr.COMPRESSION_MASK
    if codec:
        block = compress(codec, block)
    batch = _header_bytes(header, len(block), attributes, new_base, max_ts, len(keep))
    batch[HEADER_SIZE:] = block
    _CRC.pack_into(batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def rebuild_parts(
    header: BatchHeader,
    records: BatchRecords,
    keep: Sequence[int],
    delete_horizon_ms: int | None = None,
) -> tuple[list[BytesLike], int, int]:
    """``rebuild_batch`` as ``(buffers, size, max_timestamp)`` whose concatenation is the
    batch. An uncompressed batch whose records keep their deltas (no new delete horizon)
    is its new 61-byte header followed by views of the kept records in ``records.data``:
    nothing is copied, and the CRC-32C is computed over the pieces. Others are one buffer
    from ``rebuild_batch``."""
    if delete_horizon_ms is not None or header.attributes & Attr.COMPRESSION_MASK:
        batch = rebuild_batch(header, records, keep, delete_horizon_ms)
        return [batch], len(batch), _HEADER.unpack_from(batch)[8]
    data = memoryview(records.data)
    starts, ends, deltas = records.starts, records.ends, records.timestamp_deltas
    parts: list[BytesLike] = [b""]
    body = 0
    max_delta = None
    for i in keep:
        start, end = starts[i], ends[i]
        parts.append(data[start:end])
        body += end - start
        if max_delta is None or deltas[i] > max_delta:
            max_delta = deltas[i]
    if header.attributes & Attr.TIMESTAMP_TYPE:
        max_ts = header.max_timestamp
    else:
        max_ts = header.base_timestamp + (max_delta or 0)
    head = _header_bytes(header, body, header.attributes, header.base_timestamp, max_ts, len(keep))
    del head[HEADER_SIZE:]  # _header_bytes sized it for the body, which stays in the views
    crc = crc32c(memoryview(head)[ATTRIBUTES_OFFSET:])
    for part in parts[1:]:
        crc = crc32c(part, crc)
    _CRC.pack_into(head, CRC_OFFSET, crc)
    parts[0] = bytes(head)
    return parts, HEADER_SIZE + body, max_ts


def empty_batch(header: BatchHeader) -> bytes:
    """The header of ``header``'s batch with no records: what the cleaner keeps of an
    idempotent producer's last batch once every record in it is gone, so the producer's
    last sequence and epoch survive (Kafka writes the same, uncompressed)."""
    attributes = header.attributes & ~Attr.COMPRESSION_MASK
    batch = _header_bytes(
        header, 0, attributes, header.base_timestamp, header.max_timestamp, record_count=0
    )
    _CRC.pack_into(batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)
