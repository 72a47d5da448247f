"""Changes out of a buffer of record batches: what a changelog rebuild applies (sans-I/O).

This module owns the rules for turning one partition's record batches into changes:

* a record with a value sets its key; a record with a null value (a tombstone) deletes it;
* records come in offset order and, per key, the record with the highest offset wins (Kafka
  design, "Log compaction": the cleaner keeps the last value of each key);
* offsets may have gaps: the cleaner removes superseded records, and it keeps a batch that
  holds no record at all (recordCount 0) when it is the last batch of an idempotent
  producer (KIP-98). A gap is not data loss. The position after a batch is its
  ``next_offset`` (baseOffset + lastOffsetDelta + 1), which compaction can put past the
  batch's last remaining record, so positions come from batch headers, never from records;
* control batches (transaction markers) are not changes; records of aborted transactions
  are applied, as a read_uncommitted consumer sees them (Spark's Kafka source default);
* a record without a key cannot be a change (a compacted topic refuses them, Kafka's
  ``LogValidator``); one that is there anyway is counted and skipped.

Decoding goes through ``tierlog.records.arrow`` (numpy-vectorised), then each column
becomes one Python list in C (``to_pylist``): no Python code runs per record here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierlog.records.arrow import to_record_batches
from tierlog.records.reader import iter_whole_batches
from tierlog.records.varint import BytesLike


@dataclass(frozen=True, slots=True)
class Changes:
    """Changes of one partition in offset order: ``keys[i]`` set to ``values[i]`` at
    ``offsets[i]``, or deleted when ``values[i]`` is None (rows listed in ``tombstones``).

    Attributes:
        partition: the partition they were read from.
        keys, values, offsets: one entry per keyed record.
        tombstones: row numbers of the records with a null value, ascending.
        next_offset: where reading goes on after these changes (past empty batches and
            gaps at the end of what was decoded).
        keyless: records skipped because their key was null.
    """

    partition: int
    keys: list[bytes]
    values: list[bytes | None]
    offsets: list[int]
    tombstones: list[int]
    next_offset: int
    keyless: int = 0

    def __len__(self) -> int:
        return len(self.keys)


def whole_batches_next_offset(buf: BytesLike, position: int) -> tuple[int, int]:
    """``(bytes, next_offset)``: how many leading bytes of ``buf`` are whole batches and the
    offset after the last of them (``position`` when none is whole). Only headers are read.
    """
    end, next_offset = 0, position
    for pos, header in iter_whole_batches(buf, verify_crc=False):
        end = pos + header.size
        next_offset = max(next_offset, header.next_offset)
    return end, next_offset


def decode_changes(
    buf: BytesLike,
    partition: int,
    position: int,
    *,
    end_offset: int | None = None,
    verify_crc: bool = True,
) -> Changes:
    """The changes of the whole batches of ``buf`` at offsets ``>= position`` (and
    ``< end_offset`` when given); a trailing partial batch is ignored.

    Raises:
        CorruptBatchError, UnsupportedMagicError, UnsupportedCompressionError: as the
            records reader raises them.
    """
    _, next_offset = whole_batches_next_offset(buf, position)
    if end_offset is not None:
        next_offset = min(next_offset, end_offset)
    keys: list[bytes] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    tombstones: list[int] = []
    keyless = 0
    for batch in to_record_batches(
        buf, "", partition, start_offset=position, end_offset=end_offset, verify_crc=verify_crc
    ):
        key_column = batch.column(0)
        value_column = batch.column(1)
        offset_column = batch.column(4)
        if key_column.null_count:
            has_key = key_column.is_valid()
            keyless += key_column.null_count
            key_column = key_column.filter(has_key)
            value_column = value_column.filter(has_key)
            offset_column = offset_column.filter(has_key)
        if value_column.null_count:
            nulls = np.flatnonzero(value_column.is_null().to_numpy(zero_copy_only=False))
            tombstones.extend((nulls + len(keys)).tolist())
        keys.extend(key_column.to_pylist())
        values.extend(value_column.to_pylist())
        offsets.extend(offset_column.to_pylist())
    return Changes(partition, keys, values, offsets, tombstones, next_offset, keyless)


def empty_changes(partition: int, next_offset: int) -> Changes:
    """No change, reading goes on at ``next_offset`` (a range of gaps or empty batches)."""
    return Changes(partition, [], [], [], [], next_offset)


def latest_per_key(changes: Changes) -> dict[bytes, tuple[bytes | None, int]]:
    """``key -> (value, offset)`` of each key's last change in ``changes`` (value None:
    the key ends deleted). Built in C: later rows overwrite earlier ones."""
    return dict(zip(changes.keys, zip(changes.values, changes.offsets, strict=True), strict=True))
