"""Tests for tierlog.records.arrow: Spark's Kafka schema and batch -> Arrow decoding."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records import arrow
from tierlog.records.arrow import (
    HEADERS_TYPE,
    KAFKA_SCHEMA,
    batches_to_table,
    to_record_batch,
    to_record_batches,
)
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.errors import CorruptBatchError, UnsupportedCompressionError
from tierlog.records.header import Compression, TimestampType
from tierlog.records.reader import iter_batches_records

CODECS = list(Compression)


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    """(key, value, offset, ms timestamp, timestampType, headers) per row, via Python."""
    out = []
    for row in table.to_pylist():
        ts = row["timestamp"]
        millis = (ts - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
        headers = (
            None if row["headers"] is None else [(h["key"], h["value"]) for h in row["headers"]]
        )
        out.append((row["key"], row["value"], row["offset"], millis, row["timestampType"], headers))
    return out


def expected_rows(
    buf: bytes, start: int | None = None, end: int | None = None
) -> list[tuple[object, ...]]:
    """The same tuples computed with the reader, for comparison."""
    out = []
    for header, records in iter_batches_records(buf):
        if header.is_control:
            continue
        for r in records:
            if (start is None or r.offset >= start) and (end is None or r.offset < end):
                headers = [tuple(h) for h in r.headers] or None
                out.append(
                    (r.key, r.value, r.offset, r.timestamp, int(header.timestamp_type), headers)
                )
    return out


def test_schema_matches_spark_kafka_source() -> None:
    assert KAFKA_SCHEMA.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert [f.type for f in KAFKA_SCHEMA] == [
        pa.binary(),
        pa.binary(),
        pa.string(),
        pa.int32(),
        pa.int64(),
        pa.timestamp("us", tz="UTC"),
        pa.int32(),
        HEADERS_TYPE,
    ]
    assert all(f.nullable for f in KAFKA_SCHEMA)
    element = HEADERS_TYPE.value_field
    assert element.name == "element" and element.nullable
    assert [(f.name, f.type, f.nullable) for f in element.type] == [
        ("key", pa.string(), True),
        ("value", pa.binary(), True),
    ]


def test_columns_and_constants() -> None:
    records = [
        Record(b"k1", b"v1", (("a", b"1"), ("b", None)), 1_700_000_000_123),
        Record(None, b"v2", (), 1_700_000_000_456),
        Record(b"k3", None, (("c", b""),), None),
    ]
    buf = build_batch(records, base_offset=40)
    table = batches_to_table(buf, "events", 3)
    assert table.schema == KAFKA_SCHEMA
    assert table.num_rows == 3
    assert table.column("topic").to_pylist() == ["events"] * 3
    assert table.column("partition").to_pylist() == [3] * 3
    assert table.column("offset").to_pylist() == [40, 41, 42]
    assert table.column("key").to_pylist() == [b"k1", None, b"k3"]
    assert table.column("value").to_pylist() == [b"v1", b"v2", None]
    assert table.column("timestamp").to_pylist()[0] == dt.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC
    )
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [
        1_700_000_000_123_000,
        1_700_000_000_456_000,
        1_700_000_000_123_000,
    ]
    assert table.column("timestampType").to_pylist() == [0, 0, 0]
    # Spark's converter gives null, not an empty list, for a record without headers.
    assert table.column("headers").to_pylist() == [
        [{"key": "a", "value": b"1"}, {"key": "b", "value": None}],
        None,
        [{"key": "c", "value": b""}],
    ]


def test_log_append_time() -> None:
    batch = build_batch(
        [Record(None, b"a", timestamp=1), Record(None, b"b", timestamp=2)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_timestamp=5_000,
    )
    table = batches_to_table(batch, "t", 0)
    assert table.column("timestampType").to_pylist() == [1, 1]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [5_000_000, 5_000_000]


def test_control_batches_are_skipped() -> None:
    data = build_batch([Record(None, b"x")], producer_id=1, producer_epoch=0, transactional=True)
    marker = build_control_batch(
        ControlType.COMMIT, producer_id=1, producer_epoch=0, base_offset=1, timestamp=0
    )
    after = build_batch([Record(None, b"y")], base_offset=2)
    table = batches_to_table(data + marker + after, "t", 0)
    assert table.column("offset").to_pylist() == [0, 2]
    assert table.column("value").to_pylist() == [b"x", b"y"]


def test_offset_range_filter() -> None:
    buf = b"".join(
        build_batch([Record(None, b"%d" % (b * 10 + i)) for i in range(10)], base_offset=b * 10)
        for b in range(5)
    )
    assert batches_to_table(buf, "t", 0, start_offset=13, end_offset=37).column(
        "offset"
    ).to_pylist() == list(range(13, 37))
    assert batches_to_table(buf, "t", 0, start_offset=45).column("offset").to_pylist() == list(
        range(45, 50)
    )
    assert batches_to_table(buf, "t", 0, end_offset=3).column("value").to_pylist() == [
        b"0",
        b"1",
        b"2",
    ]
    assert batches_to_table(buf, "t", 0, start_offset=50).num_rows == 0
    assert batches_to_table(buf, "t", 0, start_offset=20, end_offset=20).num_rows == 0


def test_offset_range_with_compaction_gaps() -> None:
    batch = build_batch(
        [Record(b"a", b"1"), Record(b"b", None), Record(None, b"3"), Record(b"d", b"4")],
        base_offset=100,
        offset_deltas=[0, 5, 6, 20],
    )
    table = batches_to_table(batch, "t", 0, start_offset=101, end_offset=120)
    assert table.column("offset").to_pylist() == [105, 106]
    assert table.column("key").to_pylist() == [b"b", None]
    assert table.column("value").to_pylist() == [None, b"3"]


def test_batches_outside_the_range_are_not_decoded() -> None:
    # The first batch's records block is garbage; it lies before start_offset.
    bad = bytearray(build_batch([Record(None, b"x")] * 3))
    bad[-3:] = b"\xff\xff\xff"
    good = build_batch([Record(None, b"ok")], base_offset=3)
    with pytest.raises(CorruptBatchError):
        batches_to_table(bytes(bad) + good, "t", 0, verify_crc=False)
    table = batches_to_table(bytes(bad) + good, "t", 0, start_offset=3, verify_crc=False)
    assert table.column("value").to_pylist() == [b"ok"]


def test_empty_and_partial_inputs() -> None:
    assert batches_to_table(b"", "t", 0).schema == KAFKA_SCHEMA
    assert batches_to_table(b"", "t", 0).num_rows == 0
    assert to_record_batches(b"", "t", 0) == []
    whole = build_batch([Record(None, b"a")])
    partial = build_batch([Record(None, b"b")], base_offset=1)[:-5]
    assert batches_to_table(whole + partial, "t", 0).column("value").to_pylist() == [b"a"]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_mixed_codecs_and_buffer_types(kind: type) -> None:
    buf = b"".join(
        build_batch(
            [Record(b"k", b"%s-%d" % (codec.name.encode(), i), timestamp=i) for i in range(4)],
            base_offset=4 * n,
            compression=codec,
        )
        for n, codec in enumerate(CODECS)
    )
    table = batches_to_table(kind(buf), "t", 1)
    assert rows(table) == expected_rows(buf)
    assert table.num_rows == 4 * len(CODECS)


def test_mixed_null_keys() -> None:
    records = [
        Record(None if i % 3 else b"k%d" % i, None if i % 4 == 1 else b"v%d" % i) for i in range(12)
    ]
    buf = build_batch(records[:7]) + build_batch(
        records[7:], base_offset=7, compression=Compression.GZIP
    )
    table = batches_to_table(buf, "t", 0, start_offset=2, end_offset=11)
    assert table.column("key").to_pylist() == [r.key for r in records[2:11]]
    assert table.column("value").to_pylist() == [r.value for r in records[2:11]]


def test_to_record_batch() -> None:
    buf = build_batch([Record(b"k", b"v")] * 3)
    batch = to_record_batch(buf, "t", 2, start_offset=1)
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema == KAFKA_SCHEMA
    assert batch.column(4).to_pylist() == [1, 2]
    empty = to_record_batch(buf, "t", 2, start_offset=3)
    assert (empty.num_rows, empty.schema) == (0, KAFKA_SCHEMA)


def test_to_record_batch_refuses_several_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow, "CHUNK_BYTES", 20)  # the blocks take 18 and 9 bytes
    buf = build_batch([Record(b"k", b"v" * 10)]) + build_batch([Record(b"k", b"w")], base_offset=1)
    assert len(to_record_batches(buf, "t", 0)) == 2
    with pytest.raises(ValueError, match="to_record_batches"):
        to_record_batch(buf, "t", 0)


def test_chunking_splits_record_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow, "CHUNK_BYTES", 300)
    buf = b"".join(build_batch([Record(b"k", b"v" * 100)] * 2, base_offset=2 * b) for b in range(6))
    batches = to_record_batches(buf, "t", 0, start_offset=1, end_offset=11)
    assert len(batches) > 1
    assert all(b.schema == KAFKA_SCHEMA for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(1, 11))
    assert rows(table) == expected_rows(buf, 1, 11)


def test_corrupt_input_raises_records_errors() -> None:
    batch = bytearray(build_batch([Record(None, b"x")]))
    batch[-2] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        batches_to_table(bytes(batch), "t", 0)
    batch = bytearray(build_batch([Record(None, b"x")]))
    batch[22] |= 0x07  # codec bits 7
    with pytest.raises(UnsupportedCompressionError):
        batches_to_table(bytes(batch), "t", 0, verify_crc=False)


def test_offset_overflowing_int64_is_corrupt() -> None:
    batch = build_batch([Record(None, b"x")] * 2, base_offset=2**63 - 1)
    with pytest.raises(CorruptBatchError, match="int64"):
        batches_to_table(batch, "t", 0)


def test_package_import_does_not_load_pyarrow() -> None:
    code = (
        "import sys, tierlog.records\n"
        "assert 'pyarrow' not in sys.modules\n"
        "import tierlog.records.arrow\n"
        "assert 'pyarrow' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=30),
    value=st.none() | st.binary(max_size=120),
    headers=st.lists(
        st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=2
    ).map(tuple),
    timestamp=st.none() | st.integers(min_value=0, max_value=2**43),
)


@settings(max_examples=50, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.sampled_from(CODECS), st.lists(record_st, min_size=1, max_size=6), st.booleans()
        ),
        max_size=5,
    ),
    bounds=st.tuples(st.none() | st.integers(0, 35), st.none() | st.integers(0, 35)),
)
def test_matches_reader(
    batches: list[tuple[Compression, list[Record], bool]], bounds: tuple[int | None, int | None]
) -> None:
    buf, offset = b"", 0
    for codec, records, log_append in batches:
        buf += build_batch(
            records,
            base_offset=offset,
            compression=codec,
            timestamp_type=TimestampType.LOG_APPEND_TIME
            if log_append
            else TimestampType.CREATE_TIME,
        )
        offset += len(records) + 1  # leave a gap, like an aborted-transaction marker
    start, end = bounds
    table = batches_to_table(buf, "topic", 7, start_offset=start, end_offset=end)
    assert table.schema == KAFKA_SCHEMA
    assert rows(table) == expected_rows(buf, start, end)
