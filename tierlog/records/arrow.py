"""Decode a buffer of Kafka v2 batches straight into Arrow, in Spark's Kafka-source schema.

This module owns ``KAFKA_SCHEMA`` and the batch -> Arrow conversion the Spark data source
(``tierlog.spark``) and notebooks use. It is the only part of ``tierlog.records`` that
needs pyarrow, so it is imported explicitly and never by ``tierlog.records`` itself:
the broker does not pay for pyarrow.

How columns are built without a Python object per key/value: all records blocks of a
call are joined into one bytes object and the ``start, end`` positions of every key
(value) in it are found; those positions become the offsets of a binary array over the
joined bytes whose even elements are the keys and whose odd elements are the bytes
between them. One ``take`` of the even elements then copies the keys out in C.

Finding the positions has two implementations that give the same answer:

* the fast path (needs numpy): ``reader.record_starts`` walks the records' length
  prefixes — the only serial dependency in a records block — and every other field of
  every record of the call is then decoded at once with numpy (``_decode_fast``),
  offsets and timestamps as base + delta arrays, headers one header index at a time
  (the j-th header of every record at once). It handles the common shapes: varints of
  up to 4 bytes (8 for timestampDelta), up to 32 headers a record. Anything it does not
  accept, including every malformed input, makes it give up without a result;
* the reference path, ``reader.decode_columns`` (one Python loop per record), which
  then decodes the call again and raises the precise ``CorruptBatchError``.

Why this module is past 600 lines: the two paths stay side by side and independent down
to the Arrow arrays, because the reference is the oracle the fast path is tested against
(tests/records/test_arrow_fast.py). If the fast path grows further, it moves into a
module of its own (``_arrow_fast.py``) with this module keeping the schema and the walk.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from typing import NamedTuple

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
    record_starts,
    records_block,
)
from tierlog.records.varint import INT64_MAX, BytesLike
from tierlog.records.varint_np import VarintTooLong, decode_varints

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy comes with pandas/pyspark; see FAST_DECODE
    HAVE_NUMPY = False
else:
    HAVE_NUMPY = True

# Whether _to_record_batch tries the numpy fast path first. Tests and bench/spark_read.py
# turn it off to compare with the reference path; the results are the same.
FAST_DECODE = HAVE_NUMPY

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

# Empty, not `pa.array([])`: any `pa.array` call imports pandas (pyarrow checks for its
# types), 0.15 s that Spark's planning workers, which import this module but never read
# records, would pay at import.
_evens = pa.nulls(0, pa.int32())


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


# Varints the fast path decodes: 4 bytes (28 bits, so int32 fields never overflow) and 8
# for timestampDelta; longer codes are legal but rare and go to the reference path.
_VARINT_BYTES = 4
_VARLONG_BYTES = 8
# Bases the fast path adds deltas to without overflowing int64 (deltas of up to 4 and 8
# bytes are below 2**27 and 2**55 in magnitude); batches past them go to the reference.
_OFFSET_BASE_LIMIT = INT64_MAX - (1 << 27)
_TIMESTAMP_BASE_LIMIT = 1 << 62


class _GiveUp(Exception):
    """The fast path does not take this input; the reference path decides."""


class _Columns(NamedTuple):
    """What _decode_fast finds: one row per record of the call, in numpy arrays."""

    offsets: np.ndarray  # int64, absolute
    millis: np.ndarray  # int64, as reported (LogAppendTime batches: maxTimestamp)
    timestamp_types: np.ndarray  # int32, 0 create time, 1 log append time
    key_starts: np.ndarray  # int64 positions in the data; a null key spans nothing
    key_ends: np.ndarray
    key_nulls: np.ndarray  # bool
    value_starts: np.ndarray
    value_ends: np.ndarray
    value_nulls: np.ndarray
    header_counts: np.ndarray  # int64 per record; its headers are these many items of:
    header_keys: pa.Array  # string, every header of the call in order
    header_values: pa.Array  # binary


def _varints(u8: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """``decode_varints``, giving the input up on a code longer than ``max_bytes``."""
    try:
        return decode_varints(u8, pos, max_bytes)
    except VarintTooLong:
        raise _GiveUp from None


def _per_record(
    blocks: list[tuple[BatchHeader, int, int]], field: str, counts: np.ndarray
) -> np.ndarray:
    """A header field repeated for each record of its batch."""
    return np.repeat(np.array([getattr(h, field) for h, _, _ in blocks], np.int64), counts)


def _decode_fast(data: bytes, blocks: list[tuple[BatchHeader, int, int]]) -> _Columns:
    """Decode every record of ``blocks`` (``header, start, end`` in ``data``) at once.

    Raises:
        _GiveUp: an input the fast path does not take, which includes every malformed one.
    """
    starts = record_starts(data, [(start, end, h.record_count) for h, start, end in blocks])
    if starts is None:
        raise _GiveUp
    for header, _, _ in blocks:
        if (
            not -_OFFSET_BASE_LIMIT <= header.base_offset <= _OFFSET_BASE_LIMIT
            or not -_TIMESTAMP_BASE_LIMIT <= header.base_timestamp <= _TIMESTAMP_BASE_LIMIT
        ):
            raise _GiveUp
    counts = np.array([h.record_count for h, _, _ in blocks], np.int64)
    u8 = np.frombuffer(data, np.uint8)
    rec = starts

    # Why nothing malformed passes: the check at the end makes each record's fields
    # finish exactly at the end its length states, and as positions only grow field by
    # field (a record takes at least 7 bytes), every read lay inside its own record and
    # no clipped read mattered. The records tiling each block is then implied by the
    # walk; checking it costs little and keeps the reasoning local.
    length, body = _varints(u8, rec, _VARINT_BYTES)
    rec_end = body + length
    expected_end = np.empty_like(rec)
    expected_end[:-1] = rec[1:]
    expected_end[np.cumsum(counts)[counts > 0] - 1] = [e for h, _, e in blocks if h.record_count]
    if not (rec_end == expected_end).all():
        raise _GiveUp
    ts_delta, pos = _varints(u8, body + 1, _VARLONG_BYTES)  # + 1: the attributes byte
    offset_delta, pos = _varints(u8, pos, _VARINT_BYTES)
    key_len, key_starts = _varints(u8, pos, _VARINT_BYTES)
    key_ends = key_starts + np.maximum(key_len, 0)
    value_len, value_starts = _varints(u8, key_ends, _VARINT_BYTES)
    value_ends = value_starts + np.maximum(value_len, 0)
    if (key_len < -1).any() or (value_len < -1).any():
        raise _GiveUp
    header_counts, fields_end = _varints(u8, value_ends, _VARINT_BYTES)
    if (header_counts < 0).any():
        raise _GiveUp
    header_bounds = _decode_headers_fast(u8, header_counts, fields_end)
    if not (fields_end == rec_end).all():
        raise _GiveUp
    # Arrow arrays over positions only now that they are known to be in order.
    header_keys, header_values = _header_items(data, *header_bounds)

    millis = _per_record(blocks, "base_timestamp", counts) + ts_delta
    log_append = np.array([h.attributes & Attr.TIMESTAMP_TYPE for h, _, _ in blocks], np.bool_)
    if log_append.any():
        # Kafka reports maxTimestamp for every record of a LogAppendTime batch.
        lat_rows = np.repeat(log_append, counts)
        np.copyto(millis, _per_record(blocks, "max_timestamp", counts), where=lat_rows)
    return _Columns(
        _per_record(blocks, "base_offset", counts) + offset_delta,
        millis,
        np.repeat(log_append.astype(np.int32), counts),
        *(key_starts, key_ends, key_len == -1),
        *(value_starts, value_ends, value_len == -1),
        header_counts,
        header_keys,
        header_values,
    )


# More headers than this in one record (legal, rare) go to the reference path, so that
# the loop over header positions below stays short.
_MAX_FAST_HEADERS = 32


def _decode_headers_fast(
    u8: np.ndarray, counts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Decode the headers of every record, the j-th header of all records at once.

    ``counts[i]`` headers start at ``ends[i]``, which moves past them. Returns the
    positions of all headers, record after record: key starts and ends, value starts,
    ends and nulls.

    Raises:
        _GiveUp: too many headers, or a negative length.
    """
    items = int(counts.sum())
    key_starts = np.empty(items, np.int64)
    key_ends = np.empty(items, np.int64)
    value_starts = np.empty(items, np.int64)
    value_ends = np.empty(items, np.int64)
    value_nulls = np.empty(items, np.bool_)
    if items:
        rows = np.flatnonzero(counts)
        left = counts[rows]
        if left.max() > _MAX_FAST_HEADERS:
            raise _GiveUp
        slot = np.cumsum(left) - left  # item index of each row's first header
        pos = ends[rows]
        for _ in range(int(left.max())):
            key_len, key_starts[slot] = _varints(u8, pos, _VARINT_BYTES)
            key_ends[slot] = key_starts[slot] + key_len
            value_len, value_starts[slot] = _varints(u8, key_ends[slot], _VARINT_BYTES)
            if (key_len < 0).any() or (value_len < -1).any():
                raise _GiveUp
            value_nulls[slot] = value_len == -1
            pos = value_ends[slot] = value_starts[slot] + np.maximum(value_len, 0)
            ends[rows] = pos
            left -= 1
            more = left > 0
            rows, left, slot, pos = rows[more], left[more], slot[more] + 1, pos[more]
    return key_starts, key_ends, value_starts, value_ends, value_nulls


def _header_items(
    data: bytes,
    key_starts: np.ndarray,
    key_ends: np.ndarray,
    value_starts: np.ndarray,
    value_ends: np.ndarray,
    value_nulls: np.ndarray,
) -> tuple[pa.Array, pa.Array]:
    """The keys (string) and values (binary) of all headers, from their positions.

    Raises:
        _GiveUp: a key is not UTF-8 (the reference path says which).
    """
    buffer = pa.py_buffer(data)
    items = len(key_starts)
    keys = _binary_fast(buffer, key_starts, key_ends, np.zeros(items, np.bool_))
    try:
        keys = pa.Array.from_buffers(pa.string(), items, keys.buffers())
        keys.validate(full=True)  # checks UTF-8 as Python's decoder does
    except pa.ArrowInvalid:
        raise _GiveUp from None
    return keys, _binary_fast(buffer, value_starts, value_ends, value_nulls)


def _binary_fast(
    data: pa.Buffer,
    starts: np.ndarray,
    ends: np.ndarray,
    nulls: np.ndarray,
) -> pa.Array:
    """A key or value column from positions into ``data`` (one slice of _Columns)."""
    count = len(starts)
    null_count = int(np.count_nonzero(nulls))
    if null_count == count:
        return pa.nulls(count, pa.binary())
    bounds = np.empty(2 * count, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    spans = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pa.py_buffer(bounds), data])
    out = spans.take(_even_indices(count))
    if null_count == 0:
        return out
    # Null rows span nothing; a validity bitmap marks them.
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, *out.buffers()[1:]], null_count=null_count
    )


def _from_fast_columns(
    joined: bytes,
    cols: _Columns,
    topic: str,
    partition: int,
    start_offset: int | None,
    end_offset: int | None,
) -> pa.RecordBatch | None:
    offsets = cols.offsets
    # Offsets increase through a well-formed log, so the wanted rows are one slice
    # (bisect, as the reference path does, so that both agree even when they do not).
    lo = 0 if start_offset is None else bisect_left(offsets, start_offset)
    hi = len(offsets) if end_offset is None else bisect_left(offsets, end_offset, lo)
    count = hi - lo
    if count <= 0:
        return None
    data = pa.py_buffer(joined)
    # Unchecked multiply: a timestamp past year 294247 wraps rather than raising.
    micros = cols.millis[lo:hi] * 1000
    return pa.RecordBatch.from_arrays(
        [
            _binary_fast(data, cols.key_starts[lo:hi], cols.key_ends[lo:hi], cols.key_nulls[lo:hi]),
            _binary_fast(
                data, cols.value_starts[lo:hi], cols.value_ends[lo:hi], cols.value_nulls[lo:hi]
            ),
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(offsets[lo:hi]),
            pa.Array.from_buffers(TIMESTAMP_TYPE, count, [None, pa.py_buffer(micros)]),
            pa.array(cols.timestamp_types[lo:hi]),
            _headers_fast(cols, lo, hi),
        ],
        schema=KAFKA_SCHEMA,
    )


def _headers_fast(cols: _Columns, lo: int, hi: int) -> pa.Array:
    """Rows ``lo:hi`` of the headers column, null where a record has no headers."""
    count = hi - lo
    counts = cols.header_counts[lo:hi]
    present = counts > 0
    with_headers = int(np.count_nonzero(present))
    if not with_headers:
        return pa.nulls(count, HEADERS_TYPE)
    list_offsets = np.zeros(count + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    first = int(cols.header_counts[:lo].sum())
    size = int(list_offsets[-1])
    items = pa.StructArray.from_arrays(
        [cols.header_keys.slice(first, size), cols.header_values.slice(first, size)],
        fields=list(HEADER_STRUCT),
    )
    validity = np.packbits(present, bitorder="little")
    return pa.Array.from_buffers(
        HEADERS_TYPE,
        count,
        [pa.py_buffer(validity), pa.py_buffer(list_offsets)],
        null_count=count - with_headers,
        children=[items],
    )


def _to_record_batch(
    pending: list[tuple[BatchHeader, bytes | memoryview, int, int]],
    topic: str,
    partition: int,
    start_offset: int | None,
    end_offset: int | None,
) -> pa.RecordBatch | None:
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
    if FAST_DECODE:
        blocks = [
            (header, start, end)
            for (header, _, _, _), (start, end) in zip(pending, spans, strict=True)
        ]
        try:
            fast = _decode_fast(joined, blocks)
        except _GiveUp:
            pass
        else:
            return _from_fast_columns(joined, fast, topic, partition, start_offset, end_offset)
    return _reference_record_batch(
        pending, joined, spans, topic, partition, start_offset, end_offset
    )


def _reference_record_batch(
    pending: list[tuple[BatchHeader, bytes | memoryview, int, int]],
    joined: bytes,
    spans: list[tuple[int, int]],
    topic: str,
    partition: int,
    start_offset: int | None,
    end_offset: int | None,
) -> pa.RecordBatch | None:
    cols = RecordColumns()
    timestamp_types: list[int] = []
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
