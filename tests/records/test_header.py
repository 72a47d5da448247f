"""Tests for tierlog.records.header: parse, validate and rewrite the 61-byte header."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import CorruptBatchError, RecordsError, UnsupportedMagicError
from tierlog.records.header import (
    CRC_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    Compression,
    TimestampType,
    compute_crc,
    iter_batches,
    parse_header,
    peek_size,
    rewrite_prefix,
    set_log_append_time,
    validate_batch,
)
from tierlog.records.reader import iter_records


def sample_batch(**kwargs: Any) -> bytes:
    records = [Record(b"k%d" % i, b"value %d" % i, timestamp=1000 + i) for i in range(3)]
    return build_batch(records, **kwargs)


def test_parse_header_reads_every_field() -> None:
    batch = sample_batch(
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=99,
        producer_epoch=3,
        base_sequence=11,
        transactional=True,
        compression=Compression.GZIP,
    )
    header = parse_header(batch)
    assert header.base_offset == 42
    assert header.size == len(batch)
    assert header.partition_leader_epoch == 7
    assert header.magic == 2
    assert header.crc == compute_crc(batch)
    assert header.compression is Compression.GZIP
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.last_offset_delta == 2
    assert (header.last_offset, header.next_offset) == (44, 45)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1002)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 3, 11)
    assert header.last_sequence == 13
    assert header.record_count == 3


def test_parse_header_at_position() -> None:
    batch = sample_batch(base_offset=5)
    assert parse_header(b"\x00" * 10 + batch, 10).base_offset == 5


def test_last_sequence_wraps_at_int32() -> None:
    header = parse_header(sample_batch(producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 0  # 2**31 - 2 + 2 wraps past INT32_MAX to 0
    assert parse_header(sample_batch()).last_sequence == -1


def test_validate_accepts_built_batch() -> None:
    batch = sample_batch()
    assert validate_batch(batch) == parse_header(batch)
    assert validate_batch(memoryview(batch)) == parse_header(batch)


@pytest.mark.parametrize("position", [CRC_OFFSET, 21, 30, HEADER_SIZE + 3, -1])
def test_bad_crc(position: int) -> None:
    batch = bytearray(sample_batch())
    batch[position] ^= 0x10
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate_batch(batch)


def test_fields_outside_the_crc_do_not_affect_it() -> None:
    batch = bytearray(sample_batch())
    batch[0:8] = struct.pack(">q", 123)  # baseOffset
    batch[12:16] = struct.pack(">i", 9)  # partitionLeaderEpoch
    assert validate_batch(batch).base_offset == 123


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_wrong_magic(magic: int) -> None:
    batch = bytearray(sample_batch())
    struct.pack_into(">b", batch, MAGIC_OFFSET, magic)
    with pytest.raises(UnsupportedMagicError, match=f"magic {magic}, only v2"):
        parse_header(batch)
    with pytest.raises(UnsupportedMagicError):
        validate_batch(batch)
    assert issubclass(UnsupportedMagicError, CorruptBatchError)


@pytest.mark.parametrize("size", [0, 1, 12, 60])
def test_header_truncated(size: int) -> None:
    with pytest.raises(CorruptBatchError, match="header truncated"):
        parse_header(sample_batch()[:size])


@pytest.mark.parametrize("cut", [1, 10])
def test_batch_truncated(cut: int) -> None:
    batch = sample_batch()
    parse_header(batch[:-cut])  # the header alone is fine
    with pytest.raises(CorruptBatchError, match="truncated"):
        validate_batch(batch[:-cut])


@pytest.mark.parametrize("length", [-1, 0, 48])
def test_batch_length_too_short(length: int) -> None:
    batch = bytearray(sample_batch())
    struct.pack_into(">i", batch, 8, length)
    with pytest.raises(CorruptBatchError, match="smaller than a header"):
        parse_header(batch)


@pytest.mark.parametrize("offset", [23, 57])  # lastOffsetDelta, recordCount
def test_negative_counts(offset: int) -> None:
    batch = bytearray(sample_batch())
    struct.pack_into(">i", batch, offset, -5)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    with pytest.raises(CorruptBatchError, match="negative"):
        validate_batch(batch)


def test_rewrite_prefix_keeps_crc_valid() -> None:
    batch = sample_batch(base_offset=0, partition_leader_epoch=-1)
    prefix = rewrite_prefix(batch, 1_000_000, 12)
    assert len(prefix) == MAGIC_OFFSET + 1
    rewritten = prefix + batch[MAGIC_OFFSET + 1 :]
    header = validate_batch(rewritten)
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000, 12)
    assert header.crc == parse_header(batch).crc
    assert [r.offset for r in iter_records(rewritten)] == [1_000_000, 1_000_001, 1_000_002]


def test_set_log_append_time_recomputes_crc() -> None:
    batch = bytearray(b"\xee" * 5 + sample_batch(compression=Compression.LZ4))
    old_crc = parse_header(batch, 5).crc
    set_log_append_time(batch, 5, 77_777)
    header = validate_batch(batch, 5)
    assert header.crc != old_crc
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 77_777
    assert header.compression is Compression.LZ4  # other attribute bits kept
    # Readers now report the append time for every record, as Kafka does.
    assert [r.timestamp for r in iter_records(bytes(batch[5:]))] == [77_777] * 3
    assert batch[:5] == b"\xee" * 5


def test_iter_batches_walks_whole_batches() -> None:
    batches = [sample_batch(base_offset=o) for o in (0, 3, 6)]
    found = list(iter_batches(b"".join(batches)))
    assert [pos for pos, _ in found] == [0, len(batches[0]), 2 * len(batches[0])]
    assert [h.base_offset for _, h in found] == [0, 3, 6]
    assert all(isinstance(h, BatchHeader) for _, h in found)


def test_iter_batches_raises_on_partial_tail() -> None:
    buf = sample_batch() + sample_batch(base_offset=3)[:-1]
    walked = iter_batches(buf)
    assert next(walked)[1].base_offset == 0
    with pytest.raises(RecordsError):
        next(walked)


def test_peek_size() -> None:
    batch = sample_batch(base_offset=8)
    assert peek_size(batch) == (8, len(batch))
    assert peek_size(batch[:11]) is None
    assert peek_size(b"xx" + batch, 2) == (8, len(batch))
