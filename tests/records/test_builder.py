"""Tests for tierlog.records.builder: batch layout, fields, control batches, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import decompress
from tierlog.records.header import (
    HEADER_SIZE,
    Compression,
    TimestampType,
    parse_header,
    validate_batch,
)
from tierlog.records.reader import iter_records
from tierlog.records.varint import decode_varint, decode_varlong

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
).map(tuple)
records_st = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=300),
        headers=headers_st,
        timestamp=st.none() | st.integers(min_value=-1, max_value=2**42),
    ),
    min_size=1,
    max_size=25,
)


def expected_timestamps(records: list[Record], base_timestamp: int | None = None) -> list[int]:
    if base_timestamp is None:
        base_timestamp = next((r.timestamp for r in records if r.timestamp is not None), -1)
    return [base_timestamp if r.timestamp is None else r.timestamp for r in records]


def test_single_record_wire_layout() -> None:
    record = Record(b"key", b"value!", headers=(("h", b"x"), ("n", None)), timestamp=1005)
    batch = build_batch([record], base_timestamp=1000, base_offset=10)
    body = batch[HEADER_SIZE:]
    length, pos = decode_varint(body, 0)
    assert pos + length == len(body)
    assert body[pos] == 0  # attributes
    ts_delta, pos = decode_varlong(body, pos + 1)
    offset_delta, pos = decode_varint(body, pos)
    assert (ts_delta, offset_delta) == (5, 0)
    key_len, pos = decode_varint(body, pos)
    assert body[pos : pos + key_len] == b"key"
    value_len, pos = decode_varint(body, pos + key_len)
    assert body[pos : pos + value_len] == b"value!"
    count, pos = decode_varint(body, pos + value_len)
    assert count == 2
    assert body[pos:] == b"\x02h\x02x\x02n\x01"  # lengths are zigzag: 1 -> 0x02, -1 -> 0x01


def test_null_key_and_value_are_length_minus_one() -> None:
    body = build_batch([Record(None, None)], base_timestamp=0)[HEADER_SIZE:]
    assert body == b"\x0c\x00\x00\x00\x01\x01\x00"  # 6 bytes after the length (12 zigzag)


def test_header_fields() -> None:
    records = [Record(b"a", b"1", timestamp=50), Record(b"b", b"2", timestamp=20)]
    batch = build_batch(
        records,
        base_offset=100,
        producer_id=4,
        producer_epoch=2,
        base_sequence=17,
        partition_leader_epoch=9,
    )
    header = validate_batch(batch)
    assert header.size == len(batch)
    assert header.base_offset == 100
    assert header.record_count == 2
    assert header.last_offset_delta == 1
    # The base is the first record's timestamp (as producers do), even if later is smaller.
    assert (header.base_timestamp, header.max_timestamp) == (50, 50)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4, 2, 17)
    assert header.partition_leader_epoch == 9
    assert header.attributes == 0


@pytest.mark.parametrize("codec", list(Compression))
def test_attributes_bits(codec: Compression) -> None:
    batch = build_batch(
        [Record(b"k", b"v" * 100)],
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        transactional=True,
        producer_id=1,
        producer_epoch=0,
    )
    (attributes,) = struct.unpack_from(">h", batch, 21)
    assert attributes == int(codec) | 0x08 | 0x10
    header = validate_batch(batch)
    assert header.compression is codec
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.is_transactional


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_compressed_body_decompresses_to_uncompressed_body(codec: Compression) -> None:
    records = [Record(b"k%d" % i, b"v" * i, timestamp=i) for i in range(50)]
    plain = build_batch(records)
    packed = build_batch(records, compression=codec)
    assert len(packed) < len(plain)
    assert decompress(codec, packed[HEADER_SIZE:]) == plain[HEADER_SIZE:]
    # Everything but length, CRC and attributes is identical in the two headers.
    assert packed[12:17] == plain[12:17]
    assert packed[23:HEADER_SIZE] == plain[23:HEADER_SIZE]


def test_missing_timestamps_take_the_base() -> None:
    records = [Record(b"a", b"1"), Record(b"b", b"2", timestamp=900), Record(b"c", b"3")]
    assert [r.timestamp for r in iter_records(build_batch(records))] == [900, 900, 900]
    batch = build_batch(records, base_timestamp=1000)
    assert [r.timestamp for r in iter_records(batch)] == [1000, 900, 1000]
    assert parse_header(batch).max_timestamp == 1000


def test_log_append_time_base_becomes_max_timestamp() -> None:
    records = [Record(None, b"1", timestamp=10), Record(None, b"2")]
    batch = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, base_timestamp=5_000)
    header = validate_batch(batch)
    assert (header.base_timestamp, header.max_timestamp) == (5_000, 5_000)
    assert [r.timestamp for r in iter_records(batch)] == [5_000, 5_000]
    # Without an explicit base, maxTimestamp is the largest record timestamp.
    batch = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert parse_header(batch).max_timestamp == 10


def test_no_timestamps_at_all_means_no_timestamp() -> None:
    header = parse_header(build_batch([Record(b"a", b"1")]))
    assert (header.base_timestamp, header.max_timestamp) == (-1, -1)


def test_offset_deltas_with_gaps() -> None:
    records = [Record(b"a", b"1"), Record(b"b", b"2"), Record(b"c", b"3")]
    batch = build_batch(records, base_offset=10, offset_deltas=[0, 4, 9])
    header = validate_batch(batch)
    assert header.last_offset_delta == 9
    assert header.record_count == 3
    assert header.next_offset == 20
    assert [r.offset for r in iter_records(batch)] == [10, 14, 19]


@pytest.mark.parametrize("deltas", [[0, 1], [0, 0, 1], [1, 1, 2], [-1, 0, 1], [0, 2, 2**31]])
def test_bad_offset_deltas(deltas: list[int]) -> None:
    records = [Record(None, b"x")] * 3
    with pytest.raises(ValueError, match="offset"):
        build_batch(records, offset_deltas=deltas)


def test_empty_record_list_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_offset": 2**63},
        {"producer_epoch": 2**15},
        {"base_sequence": -(2**31) - 1},
        {"partition_leader_epoch": 2**31},
        {"base_timestamp": -(2**63) - 1},
    ],
)
def test_out_of_range_fields_are_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        build_batch([Record(None, b"x")], **kwargs)  # type: ignore[arg-type]


def test_timestamp_delta_out_of_int64_is_rejected() -> None:
    records = [Record(None, b"x", timestamp=-(2**62)), Record(None, b"y", timestamp=2**62)]
    with pytest.raises(ValueError, match="int64"):
        build_batch(records)


def test_record_timestamp_out_of_int64_is_rejected() -> None:
    records = [Record(None, b"x", timestamp=10), Record(None, b"y", timestamp=2**63)]
    with pytest.raises(ValueError, match="outside int64"):
        build_batch(records)


def test_header_key_must_be_str() -> None:
    with pytest.raises(TypeError, match="header key"):
        build_batch([Record(None, b"x", headers=((b"bytes-key", b"v"),))])  # type: ignore[arg-type]


def test_record_is_frozen_with_slots() -> None:
    record = Record(b"k", b"v")
    with pytest.raises(AttributeError):
        record.key = b"other"  # type: ignore[misc]
    assert not hasattr(record, "__dict__")
    assert record.headers == () and record.timestamp is None


@pytest.mark.parametrize("kind", list(ControlType))
def test_control_batch(kind: ControlType) -> None:
    batch = build_control_batch(
        kind,
        producer_id=55,
        producer_epoch=4,
        base_offset=300,
        timestamp=12345,
        partition_leader_epoch=2,
        coordinator_epoch=8,
    )
    header = validate_batch(batch)
    assert header.is_control and header.is_transactional
    assert header.compression is Compression.NONE
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (55, 4, -1)
    assert (header.base_offset, header.record_count, header.last_offset_delta) == (300, 1, 0)
    assert (header.base_timestamp, header.max_timestamp) == (12345, 12345)
    assert header.partition_leader_epoch == 2
    (record,) = iter_records(batch)
    assert record.key == struct.pack(">hh", 0, int(kind))
    assert record.value == struct.pack(">hi", 0, 8)
    assert (record.offset, record.timestamp, record.headers) == (300, 12345, ())


@settings(max_examples=60, deadline=None)
@given(
    records=records_st,
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**40),
)
def test_build_then_read_round_trip(
    records: list[Record], codec: Compression, base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=codec)
    header = validate_batch(batch)
    assert header.record_count == len(records)
    decoded = list(iter_records(batch))
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [r.key for r in decoded] == [r.key for r in records]
    assert [r.value for r in decoded] == [r.value for r in records]
    assert [r.headers for r in decoded] == [r.headers for r in records]
    timestamps = expected_timestamps(records)
    assert [r.timestamp for r in decoded] == timestamps
    assert header.max_timestamp == max(timestamps)
