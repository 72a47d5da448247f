"""The records of a chunk of batches located all at once with numpy: the cleaner's fast
path (``batch_filter.walk_records`` is the per-record reference it must agree with).

The records blocks of a chunk's data batches (decompressed where a codec is set) are
joined into one buffer; ``reader.record_starts`` walks the records' length prefixes (the
one serial dependency), and every field the cleaner needs — offset and timestamp deltas,
key bounds, whether the value is null — is then decoded for all records of the chunk in
a few numpy calls. The positions are checked as ``tierlog.records.arrow``'s fast path
checks them: each record's fields must end inside it, and records must tile each block.
Anything else (including every malformed input) returns None, and the caller takes the
reference path, which says precisely what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierlog.compaction.batch_filter import BatchRecords
from tierlog.records.header import HEADER_SIZE, Attr, BatchHeader
from tierlog.records.reader import record_starts, records_block
from tierlog.records.varint import BytesLike
from tierlog.records.varint_np import VarintTooLong, decode_varints

_VARINT_BYTES = 5
_VARLONG_BYTES = 10


@dataclass(slots=True)
class ChunkRecords:
    """Every record of a chunk's data batches, one row each, batches in order."""

    data: bytes
    counts: np.ndarray  # records per batch
    first_row: np.ndarray  # each batch's first row
    starts: np.ndarray  # position of each record's length varint in ``data``
    attrs: np.ndarray  # its attributes byte
    rests: np.ndarray  # just after offsetDelta
    ends: np.ndarray
    offset_deltas: np.ndarray
    timestamp_deltas: np.ndarray
    key_starts: np.ndarray
    key_ends: np.ndarray
    key_nulls: np.ndarray
    tombstones: np.ndarray

    def keys(self) -> list[bytes]:
        """Each record's key; b"" for a null key (the caller masks those out)."""
        data = self.data
        return [
            data[s:e] for s, e in zip(self.key_starts.tolist(), self.key_ends.tolist(), strict=True)
        ]

    def batch(self, n: int) -> BatchRecords:
        """Batch ``n``'s records in the reference form ``rebuild_batch`` takes."""
        lo = int(self.first_row[n])
        hi = lo + int(self.counts[n])
        keys: list[bytes | None] = [
            None if null else self.data[s:e]
            for s, e, null in zip(
                self.key_starts[lo:hi].tolist(),
                self.key_ends[lo:hi].tolist(),
                self.key_nulls[lo:hi].tolist(),
                strict=True,
            )
        ]
        return BatchRecords(
            self.data,
            self.starts[lo:hi].tolist(),
            self.attrs[lo:hi].tolist(),
            self.rests[lo:hi].tolist(),
            self.ends[lo:hi].tolist(),
            self.offset_deltas[lo:hi].tolist(),
            self.timestamp_deltas[lo:hi].tolist(),
            keys,
            self.tombstones[lo:hi].tolist(),
        )


def _in_place(
    batches: list[tuple[BytesLike, BatchHeader]],
) -> tuple[bytes, list[tuple[int, int, int]]] | None:
    """When every batch is uncompressed and a view into one bytes object (a chunk the
    cleaner read), that object and each records block's place in it: the records are
    walked where they are, without joining them into a new buffer."""
    first = batches[0][0]
    if not isinstance(first, memoryview) or not isinstance(first.obj, bytes):
        return None
    source = first.obj
    base = np.frombuffer(source, np.uint8).ctypes.data
    blocks = []
    for batch, header in batches:
        if (
            not isinstance(batch, memoryview)
            or batch.obj is not source
            or header.attributes & Attr.COMPRESSION_MASK
        ):
            return None
        position = np.frombuffer(batch, np.uint8).ctypes.data - base
        blocks.append((position + HEADER_SIZE, position + header.size, header.record_count))
    return source, blocks


def locate(batches: list[tuple[BytesLike, BatchHeader]]) -> ChunkRecords | None:
    """The records of ``batches`` (data batches with at least one record each), or None
    when the fast path does not take them."""
    shared = _in_place(batches)
    if shared is not None:
        joined, blocks = shared
    else:
        pieces: list[BytesLike] = []
        blocks = []
        at = 0
        for batch, header in batches:
            data, start, end = records_block(batch, 0, header)
            pieces.append(data[start:end])
            blocks.append((at, at + (end - start), header.record_count))
            at += end - start
        # Eight zero bytes after the last block: key_hash reads keys a word at a time.
        joined = b"".join([*pieces, bytes(8)])
    found = record_starts(joined, blocks)
    if found is None:
        return None
    counts = np.array([count for _, _, count in blocks], dtype=np.int64)
    u8 = np.frombuffer(joined, np.uint8)
    starts = found
    try:
        length, attrs = decode_varints(u8, starts, _VARINT_BYTES)
        ends = attrs + length
        expected = np.empty_like(starts)
        expected[:-1] = starts[1:]
        expected[np.cumsum(counts) - 1] = [end for _, end, _ in blocks]
        if len(starts) == 0 or not (ends == expected).all():
            return None
        ts_delta, pos = decode_varints(u8, attrs + 1, _VARLONG_BYTES)
        offset_delta, rests = decode_varints(u8, pos, _VARINT_BYTES)
        key_len, key_starts = decode_varints(u8, rests, _VARINT_BYTES)
        key_ends = key_starts + np.maximum(key_len, 0)
        value_len, value_starts = decode_varints(u8, key_ends, _VARINT_BYTES)
    except VarintTooLong:
        return None
    if (
        (key_len < -1).any()
        or (value_len < -1).any()
        or (value_starts + np.maximum(value_len, 0) > ends).any()
    ):
        return None
    first_row = np.zeros(len(counts), dtype=np.int64)
    first_row[1:] = np.cumsum(counts)[:-1]
    return ChunkRecords(
        joined,
        counts,
        first_row,
        starts,
        attrs,
        rests,
        ends,
        offset_delta,
        ts_delta,
        key_starts,
        key_ends,
        key_len == -1,
        value_len == -1,
    )
