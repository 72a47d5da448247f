"""Tests for tierlog.records.reader: decoding records, walking buffers, corrupt records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import compress
from tierlog.records.errors import CorruptBatchError, RecordsError
from tierlog.records.header import (
    CRC_OFFSET,
    HEADER_SIZE,
    Compression,
    TimestampType,
    compute_crc,
    parse_header,
)
from tierlog.records.reader import (
    DecodedRecord,
    RecordColumns,
    decode_batch,
    decode_columns,
    iter_batches_records,
    iter_records,
    iter_whole_batches,
)
from tierlog.records.varint import encode_varint, encode_varlong

CODECS = list(Compression)


def make_batch(
    body: bytes, count: int, codec: Compression = Compression.NONE, base_offset: int = 0
) -> bytes:
    """A batch with a hand-written records block, correct lengths and CRC."""
    header = bytearray(build_batch([Record(None, b"")], base_offset=base_offset)[:HEADER_SIZE])
    payload = compress(codec, body)
    struct.pack_into(">i", header, 8, HEADER_SIZE - 12 + len(payload))
    struct.pack_into(">h", header, 21, int(codec))
    struct.pack_into(">i", header, 57, count)
    batch = header + payload
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))
    return bytes(batch)


def raw_record(
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: bytes = b"\x00",
    *,
    offset_delta: int = 0,
    key_len: int | None = None,
    value_len: int | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One encoded record; the overrides write lengths that disagree with the data."""
    parts = [b"\x00", encode_varlong(0), encode_varint(offset_delta)]
    for data, override in ((key, key_len), (value, value_len)):
        size = (-1 if data is None else len(data)) if override is None else override
        parts += [encode_varint(size), data or b""]
    body = b"".join(parts) + headers
    return encode_varint(len(body) + length_adjust) + body


def records_of(records: list[Record], base_offset: int = 0) -> list[tuple[object, ...]]:
    base = next((r.timestamp for r in records if r.timestamp is not None), -1)
    return [
        (base_offset + i, base if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


def test_decoded_record_fields() -> None:
    batch = build_batch([Record(b"k", None, (("a", b"b"),), 7)], base_offset=3)
    (record,) = iter_records(batch)
    assert isinstance(record, DecodedRecord)
    assert record == DecodedRecord(
        offset=3, timestamp=7, key=b"k", value=None, headers=(("a", b"b"),)
    )


@pytest.mark.parametrize("codec", CODECS)
def test_hand_written_block_decodes(codec: Compression) -> None:
    body = (
        raw_record()
        + raw_record(None, b"x" * 200, offset_delta=1)
        + raw_record(b"", None, offset_delta=2)
    )
    records = list(iter_records(make_batch(body, 3, codec, base_offset=10)))
    assert [(r.offset, r.key, r.value) for r in records] == [
        (10, b"k", b"v"),
        (11, None, b"x" * 200),
        (12, b"", None),
    ]


def test_multi_byte_varints_everywhere() -> None:
    # Lengths and deltas of 1, 2, 3 and 5 bytes exercise every decoding path.
    records = [
        Record(b"a" * 63, b"b" * 63, timestamp=1_000_000_000_000),
        Record(b"a" * 64, b"b" * 8191, timestamp=1_000_000_000_063),
        Record(b"a" * 8192, b"b" * 70_000, timestamp=1_000_000_008_000),
        Record(None, b"", timestamp=1_005_000_000_000),
        Record(None, b"", timestamp=999_000_000_000),  # negative delta
    ]
    batch = build_batch(records, offset_deltas=[0, 63, 64, 8192, 100_000], base_offset=5)
    decoded = list(iter_records(batch))
    assert [r.offset for r in decoded] == [5, 68, 69, 8197, 100_005]
    assert [r.timestamp for r in decoded] == [r.timestamp for r in records]
    assert [(r.key, r.value) for r in decoded] == [(r.key, r.value) for r in records]


def test_log_append_time_reports_max_timestamp() -> None:
    records = [Record(None, b"1", timestamp=10), Record(None, b"2", timestamp=30)]
    batch = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert [r.timestamp for r in iter_records(batch)] == [30, 30]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_bytes_like(kind: type) -> None:
    for codec in (Compression.NONE, Compression.ZSTD):
        batch = build_batch([Record(b"k", b"v", timestamp=1)], compression=codec)
        assert list(iter_records(kind(batch))) == [(0, 1, b"k", b"v", ())]


def test_trailing_bytes_after_single_batch() -> None:
    with pytest.raises(CorruptBatchError, match="iter_batches_records"):
        iter_records(build_batch([Record(None, b"v")]) + b"\x00")


def test_crc_checked_unless_disabled() -> None:
    batch = bytearray(build_batch([Record(None, b"value")]))
    batch[-2] ^= 0x01  # the last value byte (the very last is the header count)
    with pytest.raises(CorruptBatchError, match="CRC"):
        iter_records(batch)
    assert [r.value for r in iter_records(batch, verify_crc=False)] == [b"valud"]


def test_errors_raise_before_any_record() -> None:
    body = raw_record() + raw_record(key_len=50)
    with pytest.raises(CorruptBatchError):
        iter_records(make_batch(body, 2))  # raises at the call, not on iteration


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    ("body", "count", "message"),
    [
        (raw_record() * 2, 3, "declares 3 records"),
        (raw_record() * 2, 1, "bytes left after"),
        (raw_record() * 2, 2**31 - 1, "declares"),
        (raw_record() * 2, -1, "negative"),
        (raw_record()[:-2], 1, "does not fit|truncated"),
        (raw_record(key_len=5), 1, "key length 5 overruns"),
        (raw_record(value_len=9), 1, "value length 9 overruns"),
        (raw_record(key_len=-2), 1, "negative key length -2"),
        (raw_record(value_len=-7), 1, "negative value length -7"),
        (raw_record(length_adjust=-1), 1, "fields take|overruns|does not fit"),
        (raw_record(length_adjust=2) + b"\x00\x00", 1, "record length"),
        (raw_record(headers=encode_varint(-1)), 1, "header count -1"),
        (raw_record(headers=encode_varint(1000)), 1, "header count 1000"),
        (raw_record(headers=b"\x02" + encode_varint(-3) + b"\x00"), 1, "header key length -3"),
        (raw_record(headers=b"\x02\x04\xff\xfe\x00"), 1, "UTF-8"),
        (raw_record(headers=b"\x02\x02h\x08ab"), 1, "header value length 4 overruns"),
        (raw_record(headers=b"\x02\x02h\x05"), 1, "negative header value length -3"),
        (encode_varint(6) + b"\x00" + b"\xff" * 11, 1, "varint|varlong"),
        (b"\x03", 1, "declares 1|does not fit"),
    ],
)
def test_malformed_records(codec: Compression, body: bytes, count: int, message: str) -> None:
    with pytest.raises(CorruptBatchError, match=message):
        iter_records(make_batch(body, count, codec))


def test_valid_header_key_utf8() -> None:
    key = "é!".encode()
    body = raw_record(headers=b"\x02" + encode_varint(len(key)) + key + b"\x01")
    (record,) = iter_records(make_batch(body, 1))
    assert record.headers == (("é!", None),)


def test_padded_zero_header_count_is_no_headers() -> None:
    (record,) = iter_records(make_batch(raw_record(headers=b"\x80\x00"), 1))
    assert record.headers == ()


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_raises_records_error(codec: Compression) -> None:
    records = [Record(b"k%d" % i, b"v" * i, (("h", b"%d" % i),), i) for i in range(20)]
    batch = build_batch(records, compression=codec)
    for cut in range(len(batch)):
        for verify_crc in (True, False):
            with pytest.raises(RecordsError):
                iter_records(batch[:cut], verify_crc=verify_crc)


def test_max_decompressed_size() -> None:
    batch = build_batch([Record(None, bytes(100_000))], compression=Compression.GZIP)
    with pytest.raises(CorruptBatchError, match="past"):
        iter_records(batch, max_decompressed_size=50_000)
    plain = build_batch([Record(None, bytes(100_000))])
    with pytest.raises(CorruptBatchError, match="exceeds"):
        iter_records(plain, max_decompressed_size=50_000)
    assert len(list(iter_records(plain, max_decompressed_size=None))) == 1


def test_control_batch_is_decoded_with_header() -> None:
    marker = build_control_batch(
        ControlType.ABORT, producer_id=1, producer_epoch=0, base_offset=9, timestamp=5
    )
    header, records = decode_batch(marker)
    assert header.is_control
    assert records == [(9, 5, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", ())]


def test_decode_batch_at_position() -> None:
    first = build_batch([Record(None, b"a")])
    second = build_batch([Record(None, b"b")], base_offset=1)
    header, records = decode_batch(first + second, len(first))
    assert header.base_offset == 1
    assert [r.value for r in records] == [b"b"]


def test_decode_columns_layout() -> None:
    batch = build_batch(
        [Record(b"k", None, (("h", b"v"),), 4), Record(None, b"val", (), 6)], base_offset=2
    )
    cols = RecordColumns()
    decode_columns(cols, batch, HEADER_SIZE, len(batch), parse_header(batch))
    assert len(cols) == 2
    assert cols.offsets == [2, 3]
    assert cols.timestamps == [4, 6]
    assert [batch[s:e] for s, e in pairs(cols.key_bounds)] == [b"k"]
    assert cols.key_nulls == [1]
    assert [batch[s:e] for s, e in pairs(cols.value_bounds)] == [b"val"]
    assert cols.value_nulls == [0]
    assert (cols.header_rows, cols.header_values) == ([0], [(("h", b"v"),)])
    # A second batch appends rows after the first.
    second = build_batch([Record(None, None)], base_offset=9, base_timestamp=1)
    decode_columns(cols, second, HEADER_SIZE, len(second), parse_header(second))
    assert (cols.offsets, cols.key_nulls, cols.value_nulls) == ([2, 3, 9], [1, 2], [0, 2])


def pairs(bounds: list[int]) -> list[tuple[int, int]]:
    return list(zip(bounds[::2], bounds[1::2], strict=True))


def test_iter_batches_records_mixed_codecs() -> None:
    batches, expected = [], []
    offset = 0
    for codec in CODECS:
        records = [Record(b"%d" % i, b"x" * i, timestamp=offset + i) for i in range(3)]
        batches.append(build_batch(records, base_offset=offset, compression=codec))
        expected.append(records_of(records, offset))
        offset += 3
    got = list(iter_batches_records(b"".join(batches)))
    assert [h.compression for h, _ in got] == CODECS
    assert [[tuple(r) for r in records] for _, records in got] == expected


def test_iter_batches_records_ignores_partial_tail_at_every_cut() -> None:
    first = build_batch([Record(b"a", b"1")])
    second = build_batch([Record(b"b", b"2")], base_offset=1, compression=Compression.LZ4)
    for cut in range(len(second)):
        got = list(iter_batches_records(first + second[:cut]))
        assert [[r.value for r in records] for _, records in got] == [[b"1"]]
    assert len(list(iter_batches_records(first + second))) == 2
    assert list(iter_batches_records(b"")) == []


def test_iter_batches_records_raises_after_yielding_good_batches() -> None:
    good = build_batch([Record(None, b"ok")])
    bad = bytearray(build_batch([Record(None, b"bad")], base_offset=1))
    bad[-2] ^= 0x01
    walked = iter_batches_records(good + bytes(bad) + good)
    assert next(walked)[1][0].value == b"ok"
    with pytest.raises(CorruptBatchError, match="CRC"):
        next(walked)
    assert [
        r.value for _, rs in iter_batches_records(good + bad, verify_crc=False) for r in rs
    ] == [
        b"ok",
        b"bae",
    ]


def test_iter_batches_records_rejects_impossible_batch_length() -> None:
    good = build_batch([Record(None, b"ok")])
    bogus = struct.pack(">qi", 0, 10) + b"\x00" * 60  # batchLength 10 < a header
    walked = iter_batches_records(good + bogus)
    next(walked)
    with pytest.raises(CorruptBatchError, match="smaller than a header"):
        next(walked)


def test_iter_whole_batches_positions() -> None:
    a = build_batch([Record(None, b"1")])
    b = build_batch([Record(None, b"22")], base_offset=1)
    assert [(p, h.base_offset) for p, h in iter_whole_batches(a + b + b[:30])] == [
        (0, 0),
        (len(a), 1),
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(CODECS),
            st.lists(
                st.builds(
                    Record,
                    key=st.none() | st.binary(max_size=20),
                    value=st.none() | st.binary(max_size=200),
                    headers=st.lists(
                        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)),
                        max_size=2,
                    ).map(tuple),
                    timestamp=st.none() | st.integers(min_value=0, max_value=2**45),
                ),
                min_size=1,
                max_size=8,
            ),
        ),
        max_size=5,
    ),
    st.integers(min_value=0, max_value=60),
)
def test_buffer_round_trip(batches: list[tuple[Compression, list[Record]]], tail: int) -> None:
    buf, expected, offset = b"", [], 0
    for codec, records in batches:
        buf += build_batch(records, base_offset=offset, compression=codec)
        expected += records_of(records, offset)
        offset += len(records)
    # A partial batch after the whole ones must be ignored, whatever its length.
    buf += build_batch([Record(b"tail", b"tail")], base_offset=offset)[:tail]
    got = [tuple(r) for _, records in iter_batches_records(buf) for r in records]
    assert got == expected
