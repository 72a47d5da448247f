"""Decode Kafka v2 record batches into records: one batch, or a buffer of many.

This module owns record *decoding* (the per-record layout is documented in
``tierlog.records.builder``) and the rules for walking a buffer of concatenated batches
(a Fetch response's records field, or a slice of a log segment):

* a trailing partial batch is tolerated and ignored, because a broker may cut a fetch
  response at ``max_bytes`` in the middle of a batch (KIP-74) and consumers then fetch
  again from the next offset;
* anything else malformed raises ``CorruptBatchError`` with what was wrong.

Decoding happens column-wise into ``RecordColumns`` (plain lists, positions instead of
byte copies) so that ``tierlog.records.arrow`` can build Arrow arrays without a Python
object per field; ``iter_records`` turns the columns into ``DecodedRecord`` tuples.
``record_starts`` is the serial part of the Arrow fast path: it only walks the records'
length prefixes, and ``tierlog.records.arrow`` decodes the rest with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import NamedTuple

import numpy as np

from tierlog.records.codecs import DEFAULT_MAX_SIZE, decompress
from tierlog.records.errors import CorruptBatchError
from tierlog.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    Attr,
    BatchHeader,
    parse_header,
    peek_size,
    validate_batch,
)
from tierlog.records.runs import RUN_MIN, same_size_run
from tierlog.records.varint import ZIGZAG_1, ZIGZAG_2, BytesLike, decode_varint, decode_varlong

Headers = tuple[tuple[str, bytes | None], ...]

# Smallest record on the wire: length(1) attributes(1) timestampDelta(1) offsetDelta(1)
# keyLength(1) valueLength(1) headersCount(1). Used to reject absurd record counts early.
MIN_RECORD_SIZE = 7
_MIN_RECORD_BODY = MIN_RECORD_SIZE - 1


class DecodedRecord(NamedTuple):
    """One record with absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class RecordColumns:
    """Fields of decoded records, one list per column, appended batch after batch.

    Keys and values are not copied: ``key_bounds`` holds a ``start, end`` pair (two
    entries) per non-null key, positions into the buffer that was decoded, and
    ``key_nulls`` the rows whose key is null; likewise for values. Bounds only ever
    increase, since decoding moves forward through the buffer. Headers are sparse, as
    most records have none: ``header_rows[i]`` has ``header_values[i]``. Rows count
    from 0 across every batch appended.
    """

    __slots__ = (
        "header_rows",
        "header_values",
        "key_bounds",
        "key_nulls",
        "offsets",
        "timestamps",
        "value_bounds",
        "value_nulls",
    )

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.key_bounds: list[int] = []
        self.key_nulls: list[int] = []
        self.value_bounds: list[int] = []
        self.value_nulls: list[int] = []
        self.header_rows: list[int] = []
        self.header_values: list[Headers] = []

    def __len__(self) -> int:
        return len(self.offsets)


def _corrupt(header: BatchHeader, index: int, what: str) -> CorruptBatchError:
    return CorruptBatchError(f"batch at offset {header.base_offset}, record {index}: {what}")


def _bad_length(header: BatchHeader, index: int, length: int) -> CorruptBatchError:
    return _corrupt(
        header,
        index,
        f"record length {length} does not fit the records block "
        f"(the batch declares {header.record_count} records)",
    )


def _decode_headers(
    data: bytes, pos: int, rec_end: int, count: int, header: BatchHeader, index: int
) -> tuple[Headers, int]:
    # Each header takes at least two bytes (two length varints), which bounds the count
    # before any allocation.
    if count < 0 or count * 2 > rec_end - pos:
        raise _corrupt(header, index, f"header count {count} does not fit the record")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        key_len, pos = decode_varint(data, pos)
        key_end = pos + key_len
        if key_len < 0 or key_end > rec_end:
            raise _corrupt(header, index, f"header key length {key_len} overruns the record")
        try:
            key = data[pos:key_end].decode("utf-8")
        except UnicodeDecodeError:
            raise _corrupt(header, index, "header key is not valid UTF-8") from None
        pos = key_end
        value_len, pos = decode_varint(data, pos)
        value: bytes | None = None
        if value_len >= 0:
            value_end = pos + value_len
            if value_end > rec_end:
                raise _corrupt(
                    header, index, f"header value length {value_len} overruns the record"
                )
            value = data[pos:value_end]
            pos = value_end
        elif value_len != -1:
            raise _corrupt(header, index, f"negative header value length {value_len}")
        out.append((key, value))
    return tuple(out), pos


def decode_columns(
    cols: RecordColumns, data: bytes, pos: int, end: int, header: BatchHeader
) -> None:
    """Decode the ``header.record_count`` records in ``data[pos:end]`` into ``cols``.

    ``data[pos:end]`` is the (decompressed) records block of the batch ``header``.
    Offsets and timestamps come out absolute; for LogAppendTime batches every record
    gets the batch's maxTimestamp, as Kafka reports it.

    Raises:
        CorruptBatchError: wrong record count, truncated or overlong fields, trailing
            bytes, or a header key that is not UTF-8.
    """
    count = header.record_count
    if count < 0 or count * MIN_RECORD_SIZE > end - pos:
        raise CorruptBatchError(
            f"batch at offset {header.base_offset} declares {count} records but its "
            f"records block holds {end - pos} bytes"
        )
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    row = len(cols.offsets)
    zz1 = ZIGZAG_1
    zz2 = ZIGZAG_2
    offsets_append = cols.offsets.append
    timestamps_append = cols.timestamps.append
    key_bounds_append = cols.key_bounds.append
    value_bounds_append = cols.value_bounds.append
    key_nulls_append = cols.key_nulls.append
    value_nulls_append = cols.value_nulls.append
    index = 0
    # The fast paths below inline decode_varint for one- and two-byte codes: this loop
    # runs once per record and a call costs more than the decoding itself. A read past
    # the end of ``data`` raises IndexError, turned into CorruptBatchError below; reads
    # past a record's end are caught by the bounds checks.
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                length = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    length = zz2[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
            rec_end = pos + length
            if length < _MIN_RECORD_BODY or rec_end > end:
                raise _bad_length(header, index, length)
            # Skip the attributes byte: no bits are defined for records in v2.
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz1[b]
                pos += 2
            else:
                b2 = data[pos + 2]
                if b2 < 0x80:
                    ts_delta = zz2[(b & 0x7F) | (b2 << 7)]
                    pos += 3
                else:
                    ts_delta, pos = decode_varlong(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    offset_delta = zz2[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    offset_delta, pos = decode_varint(data, pos)

            b = data[pos]
            if b < 0x80:
                key_len = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    key_len = zz2[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    key_len, pos = decode_varint(data, pos)
            if key_len >= 0:
                key_bounds_append(pos)
                pos += key_len
                if pos > rec_end:
                    raise _corrupt(header, index, f"key length {key_len} overruns the record")
                key_bounds_append(pos)
            elif key_len == -1:
                key_nulls_append(row + index)
            else:
                raise _corrupt(header, index, f"negative key length {key_len}")

            b = data[pos]
            if b < 0x80:
                value_len = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    value_len = zz2[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    value_len, pos = decode_varint(data, pos)
            if value_len >= 0:
                value_bounds_append(pos)
                pos += value_len
                if pos > rec_end:
                    raise _corrupt(header, index, f"value length {value_len} overruns the record")
                value_bounds_append(pos)
            elif value_len == -1:
                value_nulls_append(row + index)
            else:
                raise _corrupt(header, index, f"negative value length {value_len}")

            if data[pos] == 0:  # zero headers: the common case
                pos += 1
            else:
                header_count, pos = decode_varint(data, pos)
                headers, pos = _decode_headers(data, pos, rec_end, header_count, header, index)
                if headers:  # a zero count can still arrive as a padded varint
                    cols.header_rows.append(row + index)
                    cols.header_values.append(headers)
            if pos != rec_end:
                raise _corrupt(
                    header,
                    index,
                    f"record length {length} but its fields take {length + pos - rec_end}",
                )
            offsets_append(base_offset + offset_delta)
            timestamps_append(base_ts + ts_delta)
    except IndexError:
        raise _corrupt(
            header, index, f"record is truncated (the batch declares {count} records)"
        ) from None
    if pos != end:
        raise CorruptBatchError(
            f"batch at offset {base_offset}: {end - pos} bytes left after its {count} records"
        )
    if header.attributes & Attr.TIMESTAMP_TYPE:
        cols.timestamps[row:] = [header.max_timestamp] * count


# _STEPS[b0 | b1 << 8]: the bytes a record whose length code starts with bytes b0, b1
# takes (code plus body), for codes of one or two bytes; None for longer codes. Built on
# first use (64K slots, ~1 MB), as only the Arrow path walks records this way.
_STEPS: list[int | None] = []


def _steps() -> list[int | None]:
    if not _STEPS:
        one = [v + 1 for v in ZIGZAG_1]
        two = [v + 2 for v in ZIGZAG_2]
        table: list[int | None] = [None] * (1 << 16)
        for b1 in range(256):
            high = b1 << 8
            table[high : high + 0x80] = one
            if b1 < 0x80:
                table[high + 0x80 : high + 0x100] = two[b1 << 7 : (b1 + 1) << 7]
        _STEPS[:] = table
    return _STEPS


def record_starts(data: BytesLike, blocks: list[tuple[int, int, int]]) -> np.ndarray | None:
    """Where each record's length varint starts, for every ``(start, end, count)`` block.

    Only the length prefixes are read (the one serial dependency of a records block);
    ``tierlog.records.arrow`` decodes every other field of all records at once and
    checks what this walk cannot: that each record's fields end where its length says.
    A negative length can make a position here point backwards; that check rejects it.
    Runs of same-size records are found with one numpy compare each
    (``runs.same_size_run``); records of varied sizes are walked hop by hop, in
    stretches that double while no run turns up.

    Returns:
        The positions (int64), records of all blocks in order, or None when a block does
        not walk cleanly (wrong count, overrun, malformed prefix): ``decode_columns``
        then says what is wrong.
    """
    for start, end, count in blocks:
        if count < 0 or count * MIN_RECORD_SIZE > end - start:
            return None
    octets = np.frombuffer(data, np.uint8)
    pieces: list[np.ndarray] = []
    walked: list[int] = []
    append = walked.append
    steps = _steps()
    try:
        for start, end, count in blocks:
            pos, left, stretch = start, count, _STRETCH_FIRST
            while left:
                step = steps[data[pos] | data[pos + 1] << 8]
                # A damaged length can give a step below a record's size, even 0 or
                # negative, and a negative one can take ``pos`` back before the block
                # (the Arrow check rejects those records later): no run on either.
                if (
                    step is not None
                    and step >= MIN_RECORD_SIZE
                    and pos >= start
                    and left >= RUN_MIN
                    and end - pos >= RUN_MIN * step
                ):
                    ahead = pos + step
                    after = ahead + step
                    if (
                        steps[data[ahead] | data[ahead + 1] << 8] == step
                        and steps[data[after] | data[after + 1] << 8] == step
                    ):
                        run = min(same_size_run(octets, pos, end, step), left)
                        if walked:
                            pieces.append(np.array(walked, np.int64))
                            walked.clear()
                        pieces.append(np.arange(pos, pos + run * step, step, dtype=np.int64))
                        pos += run * step
                        left -= run
                        if run >= RUN_MIN:
                            stretch = _STRETCH_FIRST
                            continue
                # One table lookup per record, unrolled four times: the Python time per
                # record left on the Arrow path. A record of 8 KiB or more has a 3-byte
                # length code, whose None step raises TypeError; the slower walk takes
                # those.
                hops = min(stretch, left)
                for _ in range(hops >> 2):
                    append(pos)
                    pos += steps[data[pos] | data[pos + 1] << 8]  # type: ignore[operator]
                    append(pos)
                    pos += steps[data[pos] | data[pos + 1] << 8]  # type: ignore[operator]
                    append(pos)
                    pos += steps[data[pos] | data[pos + 1] << 8]  # type: ignore[operator]
                    append(pos)
                    pos += steps[data[pos] | data[pos + 1] << 8]  # type: ignore[operator]
                for _ in range(hops & 3):
                    append(pos)
                    pos += steps[data[pos] | data[pos + 1] << 8]  # type: ignore[operator]
                left -= hops
                stretch = min(stretch * 2, _STRETCH_MAX)
            if pos != end:
                return None
    except TypeError:
        return _record_starts_any_length(data, blocks)
    except IndexError:
        return None
    if walked:
        pieces.append(np.array(walked, np.int64))
    if not pieces:
        return np.empty(0, np.int64)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


# Records walked hop by hop before the next try for a run, doubling after each try that
# finds none (records of varied sizes then pay for few tries).
_STRETCH_FIRST = 64
_STRETCH_MAX = 8192


def _record_starts_any_length(
    data: BytesLike, blocks: list[tuple[int, int, int]]
) -> np.ndarray | None:
    """record_starts for blocks holding records with length codes of any size."""
    starts: list[int] = []
    append = starts.append
    steps = _steps()
    try:
        for start, end, count in blocks:
            pos = start
            for _ in range(count):
                append(pos)
                step = steps[data[pos] | data[pos + 1] << 8]
                if step is None:
                    length, after = decode_varint(data, pos)
                    step = after - pos + length
                pos += step
            if pos != end:
                return None
    except (IndexError, CorruptBatchError):
        return None
    return np.array(starts, np.int64)


def records_block(
    buf: BytesLike, pos: int, header: BatchHeader, max_size: int | None = DEFAULT_MAX_SIZE
) -> tuple[bytes | memoryview, int, int]:
    """Return ``(data, start, end)``: the batch at ``buf[pos:]``'s records, decompressed.

    An uncompressed block is not copied when ``buf`` is bytes; otherwise the result is
    a memoryview into ``buf``, which callers needing ``bytes`` convert.

    Raises:
        CorruptBatchError: the block does not decompress (or exceeds ``max_size``).
        UnsupportedCompressionError: unknown codec bits or missing codec library.
    """
    start = pos + HEADER_SIZE
    end = pos + header.size
    codec = header.attributes & Attr.COMPRESSION_MASK
    if codec == 0:
        if max_size is not None and end - start > max_size:
            raise CorruptBatchError(f"records block of {end - start} bytes exceeds {max_size}")
        if isinstance(buf, bytes):
            return buf, start, end
        return memoryview(buf)[start:end], 0, end - start
    data = decompress(codec, memoryview(buf)[start:end], max_size)
    return data, 0, len(data)


def _scatter(present: list[bytes | None], nulls: list[int], count: int) -> list[bytes | None]:
    """Interleave the non-null values with None at the rows listed in ``nulls``."""
    if not nulls:
        return present
    if len(nulls) == count:
        return [None] * count
    out: list[bytes | None] = [None] * count
    null_rows = set(nulls)
    values = iter(present)
    for row in range(count):
        if row not in null_rows:
            out[row] = next(values)
    return out


def _slices(data: bytes, bounds: list[int]) -> list[bytes | None]:
    return list(map(data.__getitem__, map(slice, bounds[0::2], bounds[1::2])))


def _records_from_columns(cols: RecordColumns, data: bytes) -> list[DecodedRecord]:
    count = len(cols.offsets)
    keys = _scatter(_slices(data, cols.key_bounds), cols.key_nulls, count)
    values = _scatter(_slices(data, cols.value_bounds), cols.value_nulls, count)
    no_headers: Headers = ()
    headers = [no_headers] * count
    for row, value in zip(cols.header_rows, cols.header_values, strict=True):
        headers[row] = value
    # tuple.__new__ on the NamedTuple class builds each record in C; calling
    # DecodedRecord(...) would run a Python-level __new__ per record.
    make = partial(tuple.__new__, DecodedRecord)
    return list(map(make, zip(cols.offsets, cols.timestamps, keys, values, headers, strict=True)))


def decode_batch(
    buf: BytesLike,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int | None = DEFAULT_MAX_SIZE,
) -> tuple[BatchHeader, list[DecodedRecord]]:
    """Decode the whole batch at ``buf[pos:]`` (bytes after it are not looked at).

    Raises:
        CorruptBatchError: see ``decode_columns`` and ``validate_batch``.
        UnsupportedMagicError, UnsupportedCompressionError: as named.
    """
    if verify_crc:
        header = validate_batch(buf, pos)
    else:
        header = parse_header(buf, pos)
        if pos + header.size > len(buf):
            raise CorruptBatchError(
                f"batch at offset {header.base_offset} truncated: {len(buf) - pos} of "
                f"{header.size} bytes"
            )
    data, start, end = records_block(buf, pos, header, max_decompressed_size)
    if not isinstance(data, bytes):
        data = bytes(data[start:end])
        start, end = 0, len(data)
    cols = RecordColumns()
    decode_columns(cols, data, start, end, header)
    return header, _records_from_columns(cols, data)


def iter_records(
    batch: BytesLike,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int | None = DEFAULT_MAX_SIZE,
) -> Iterator[DecodedRecord]:
    """Decode the single batch ``batch`` and return an iterator over its records.

    The whole batch is decoded before this returns, so a corrupt batch raises here,
    before any record is seen. Control batches are decoded like any other (their one
    record's key holds the marker type); check ``parse_header(batch).is_control``.

    Args:
        batch: exactly one batch; trailing bytes are an error (use
            ``iter_batches_records`` for a buffer of several).
        verify_crc: check the CRC-32C first (skip only for bytes already verified).
        max_decompressed_size: bound on the decompressed records block.

    Raises:
        CorruptBatchError: bad CRC, truncation, trailing bytes, malformed records.
        UnsupportedMagicError, UnsupportedCompressionError: as named.
    """
    header, records = decode_batch(
        batch, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
    )
    if header.size != len(batch):
        raise CorruptBatchError(
            f"{len(batch) - header.size} bytes after the batch at offset "
            f"{header.base_offset}; use iter_batches_records for several batches"
        )
    return iter(records)


def iter_whole_batches(
    buf: BytesLike, *, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` per complete batch, stopping at a partial tail.

    Unlike ``header.iter_batches`` this tolerates a trailing partial batch, as a
    consumer must (see the module docstring). A batch that is whole but malformed, or a
    batchLength too small for a header, still raises.

    Raises:
        CorruptBatchError, UnsupportedMagicError: a malformed complete batch.
    """
    pos = 0
    size_of_buf = len(buf)
    while True:
        peeked = peek_size(buf, pos)
        if peeked is None:
            return
        base_offset, size = peeked
        if size < HEADER_SIZE:
            raise CorruptBatchError(
                f"batch at offset {base_offset}: batchLength {size - LOG_OVERHEAD} is "
                "smaller than a header"
            )
        if pos + size > size_of_buf:
            return
        yield pos, (validate_batch(buf, pos) if verify_crc else parse_header(buf, pos))
        pos += size


def iter_batches_records(
    buf: BytesLike,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int | None = DEFAULT_MAX_SIZE,
) -> Iterator[tuple[BatchHeader, list[DecodedRecord]]]:
    """Yield ``(header, records)`` for each complete batch of ``buf``, in order.

    Not flattened: callers need the header to skip control batches and aborted
    transactions (producer id) and to know where the next fetch starts
    (``header.next_offset``, which compaction can put past the last record). A
    trailing partial batch is ignored.

    Raises:
        CorruptBatchError, UnsupportedMagicError, UnsupportedCompressionError: from the
            first malformed complete batch; the batches before it have been yielded.
    """
    for pos, _ in iter_whole_batches(buf, verify_crc=verify_crc):
        # iter_whole_batches has checked the CRC (if asked) already.
        yield decode_batch(buf, pos, verify_crc=False, max_decompressed_size=max_decompressed_size)
