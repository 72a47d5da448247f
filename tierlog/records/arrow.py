"""Decode a buffer of Kafka v2 batches straight into Arrow, in Spark's Kafka-source schema.

This module owns ``KAFKA_SCHEMA`` and the batch -> Arrow conversion the Spark data source
(``tierlog.spark``) and notebooks use. It is the only part of ``tierlog.records`` that
needs pyarrow, so it is imported explicitly and never by ``tierlog.records`` itself:
the broker does not pay for pyarrow.

How columns are built without a Python object per key/value: all records blocks of a
call are joined into one bytes object, ``reader.decode_columns`` records the
``start, end`` positions of every non-null key (value) in it, and those positions become
the offsets of a binary array over the joined bytes whose even elements are the keys
and whose odd elements are the bytes between them. One ``take`` of the even elements
then copies the keys out in C. Offsets, timestamps and the per-batch columns are built
from plain lists in bulk.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left

import pyarrow as pa
import pyarrow.compute as pc

from tierlog.records.codecs import DEFAULT_MAX_SIZE
from tierlog.records.errors import CorruptBatchError
from tierlog.records.header import Attr, BatchHeader
from tierlog.records.reader import (
    Headers,
    RecordColumns,
    decode_columns,
    iter_whole_batches,
    records_block,
)
from tierlog.records.varint import BytesLike

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# PySpark maps ArrayType to a list whose item field is called "element"
# (pyspark.sql.pandas.types.to_arrow_type); a different name fails the schema match.
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))
# Spark's Kafka source declares `timestamp` as TimestampType, which is microseconds since
# the epoch; PySpark's Arrow mapping for TimestampType is timestamp("us", tz="UTC") (the
# JVM reads Arrow timestamps only with a zone). Kafka's milliseconds are multiplied by
# 1000, as Spark's own DateTimeUtils.fromJavaTimestamp does.
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

# Field for field the schema Spark's Kafka source reports with includeHeaders=true
# (KafkaRecordToRowConverter); Spark makes every column nullable, and so do we.
KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADERS_TYPE),
    ]
)

# Positions into the records data are int32 offsets of a binary array, so one RecordBatch
# covers at most this many bytes of records; more become further batches.
CHUNK_BYTES = 1 << 30

_evens = pa.array([], pa.int32())


def _even_indices(count: int) -> pa.Array:
    """0, 2, 4 ... (count values), sliced from a cached array that grows by doubling.

    Two threads growing it at once only both build an array; either result is correct.
    """
    global _evens
    if len(_evens) < count:
        size = max(count, 2 * len(_evens), 1024)
        _evens = pa.array(range(0, 2 * size, 2), pa.int32())
    return _evens.slice(0, count)


def _binary_column(
    data: pa.Buffer, bounds: list[int], nulls: list[int], lo: int, hi: int
) -> pa.Array:
    """Rows ``lo:hi`` of a key or value column (see RecordColumns for the layout)."""
    count = hi - lo
    null_lo = bisect_left(nulls, lo)
    null_hi = bisect_left(nulls, hi)
    null_count = null_hi - null_lo
    if null_count == count:
        return pa.nulls(count, pa.binary())
    # Non-null values before row lo, and those within lo:hi.
    first = lo - null_lo
    present = count - null_count
    spans_offsets = pa.array(bounds[2 * first : 2 * (first + present)], pa.int32())
    spans = pa.Array.from_buffers(
        pa.binary(), 2 * present - 1, [None, spans_offsets.buffers()[1], data]
    )
    if null_count == 0:
        return spans.take(_even_indices(present))
    # Mixed null and non-null rows (rare): a null index makes take() emit a null.
    null_rows = set(nulls[null_lo:null_hi])
    evens = itertools.count(0, 2)
    indices = [None if row in null_rows else next(evens) for row in range(lo, hi)]
    return spans.take(pa.array(indices, pa.int32()))


def _headers_column(rows: list[int], values: list[Headers], lo: int, hi: int) -> pa.Array:
    """Rows ``lo:hi`` of the headers column: null where a record has no headers, as in
    Spark's converter."""
    count = hi - lo
    first = bisect_left(rows, lo)
    last = bisect_left(rows, hi)
    if first == last:
        return pa.nulls(count, HEADERS_TYPE)
    lengths = [0] * count
    validity = bytearray((count + 7) // 8)
    keys: list[str] = []
    header_values: list[bytes | None] = []
    for row, headers in zip(rows[first:last], values[first:last], strict=True):
        i = row - lo
        lengths[i] = len(headers)
        validity[i >> 3] |= 1 << (i & 7)
        for key, value in headers:
            keys.append(key)
            header_values.append(value)
    list_offsets = pa.array([0, *itertools.accumulate(lengths)], pa.int32())
    items = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(header_values, pa.binary())],
        fields=list(HEADER_STRUCT),
    )
    return pa.Array.from_buffers(
        HEADERS_TYPE,
        count,
        [pa.py_buffer(validity), list_offsets.buffers()[1]],
        children=[items],
    )


def _to_record_batch(
    pending: list[tuple[BatchHeader, bytes | memoryview, int, int]],
    topic: str,
    partition: int,
    start_offset: int | None,
    end_offset: int | None,
) -> pa.RecordBatch | None:
    cols = RecordColumns()
    timestamp_types: list[int] = []
    first_data = pending[0][1]
    joined: bytes
    if (
        isinstance(first_data, bytes)
        and pending[-1][3] < 1 << 31  # positions must fit int32 offsets
        and all(data is first_data for _, data, _, _ in pending)
    ):
        # All blocks live in one bytes object (uncompressed batches of a bytes buffer,
        # or a single decompressed block): decode in place, positions only increase.
        joined = first_data
        spans = [(start, end) for _, _, start, end in pending]
    else:
        joined = b"".join(memoryview(data)[start:end] for _, data, start, end in pending)
        ends = list(itertools.accumulate(end - start for _, _, start, end in pending))
        spans = list(zip([0, *ends[:-1]], ends, strict=True))
    for (header, _, _, _), (start, end) in zip(pending, spans, strict=True):
        decode_columns(cols, joined, start, end, header)
        timestamp_types += [1 if header.attributes & Attr.TIMESTAMP_TYPE else 0] * (
            header.record_count
        )

    offsets = cols.offsets
    # Offsets increase through a well-formed log, so the wanted rows are one slice.
    lo = 0 if start_offset is None else bisect_left(offsets, start_offset)
    hi = len(offsets) if end_offset is None else bisect_left(offsets, end_offset, lo)
    count = hi - lo
    if count <= 0:
        return None
    data = pa.py_buffer(joined)
    try:
        offset_array = pa.array(offsets[lo:hi], pa.int64())
        millis = pa.array(cols.timestamps[lo:hi], pa.int64())
    except OverflowError:
        raise CorruptBatchError("record offset or timestamp overflows int64") from None
    # Unchecked multiply: a timestamp past year 294247 wraps rather than raising.
    timestamps = pc.multiply(millis, 1000).view(TIMESTAMP_TYPE)
    return pa.RecordBatch.from_arrays(
        [
            _binary_column(data, cols.key_bounds, cols.key_nulls, lo, hi),
            _binary_column(data, cols.value_bounds, cols.value_nulls, lo, hi),
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            offset_array,
            timestamps,
            pa.array(timestamp_types[lo:hi], pa.int32()),
            _headers_column(cols.header_rows, cols.header_values, lo, hi),
        ],
        schema=KAFKA_SCHEMA,
    )


def to_record_batches(
    buf: BytesLike,
    topic: str,
    partition: int,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_SIZE,
) -> list[pa.RecordBatch]:
    """Decode concatenated batches into RecordBatches of ``KAFKA_SCHEMA``.

    Control batches (transaction markers) are skipped: they are not user records, and
    Spark's Kafka source never shows them. Records of aborted transactions are kept
    (read_uncommitted, Spark's default). A trailing partial batch is ignored.

    Args:
        buf: concatenated v2 batches, e.g. a Fetch response's records or a segment slice.
        topic, partition: values of the constant columns.
        start_offset, end_offset: keep records with start_offset <= offset < end_offset;
            None leaves that side open. Batches wholly outside are not decoded.
        verify_crc: check each batch's CRC-32C.
        max_decompressed_size: bound per batch, capped at ``CHUNK_BYTES``.

    Returns:
        Usually one RecordBatch; one more per ``CHUNK_BYTES`` of records, none if no
        record is selected.

    Raises:
        CorruptBatchError, UnsupportedMagicError, UnsupportedCompressionError: as the
            reader raises them.
    """
    limit = min(max_decompressed_size, CHUNK_BYTES)
    out: list[pa.RecordBatch] = []
    pending: list[tuple[BatchHeader, bytes | memoryview, int, int]] = []
    pending_size = 0
    for pos, header in iter_whole_batches(buf, verify_crc=verify_crc):
        if header.attributes & Attr.CONTROL:
            continue
        if start_offset is not None and header.last_offset < start_offset:
            continue
        if end_offset is not None and header.base_offset >= end_offset:
            break
        data, start, end = records_block(buf, pos, header, limit)
        if pending and pending_size + (end - start) > CHUNK_BYTES:
            batch = _to_record_batch(pending, topic, partition, start_offset, end_offset)
            if batch is not None:
                out.append(batch)
            pending, pending_size = [], 0
        pending.append((header, data, start, end))
        pending_size += end - start
    if pending:
        batch = _to_record_batch(pending, topic, partition, start_offset, end_offset)
        if batch is not None:
            out.append(batch)
    return out


def to_record_batch(
    buf: BytesLike,
    topic: str,
    partition: int,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_SIZE,
) -> pa.RecordBatch:
    """``to_record_batches`` as exactly one RecordBatch (zero rows when nothing matches),
    the unit a PySpark data source's ``read()`` yields.

    Raises:
        ValueError: the records need more than one RecordBatch (over ``CHUNK_BYTES``).
        CorruptBatchError, UnsupportedMagicError, UnsupportedCompressionError: as the
            reader raises them.
    """
    batches = to_record_batches(
        buf,
        topic,
        partition,
        start_offset=start_offset,
        end_offset=end_offset,
        verify_crc=verify_crc,
        max_decompressed_size=max_decompressed_size,
    )
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=KAFKA_SCHEMA)
    if len(batches) > 1:
        raise ValueError(
            f"records span {len(batches)} RecordBatches of up to {CHUNK_BYTES} bytes; "
            "use to_record_batches"
        )
    return batches[0]


def batches_to_table(
    buf: BytesLike,
    topic: str,
    partition: int,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_SIZE,
) -> pa.Table:
    """``to_record_batches`` as one Table (zero rows, same schema, when nothing matches)."""
    batches = to_record_batches(
        buf,
        topic,
        partition,
        start_offset=start_offset,
        end_offset=end_offset,
        verify_crc=verify_crc,
        max_decompressed_size=max_decompressed_size,
    )
    return pa.Table.from_batches(batches, schema=KAFKA_SCHEMA)
