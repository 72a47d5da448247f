"""Changes out of record batches as a compacted log holds them: offset gaps, a batch whose
last record is below its lastOffsetDelta, an empty batch kept for an idempotent producer,
a transaction marker, a tombstone and a partial batch at the end."""

from __future__ import annotations

import struct

from tierlog.compaction.changelog_decode import decode_changes, whole_batches_next_offset
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    compute_crc,
    parse_header,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LAST_OFFSET_DELTA = ATTRIBUTES_OFFSET + 2


def with_last_offset_delta(batch: bytes, delta: int) -> bytes:
    """``batch`` claiming offsets up to base + ``delta``: what the cleaner leaves when it
    removed the batch's last records (the field is inside the CRC)."""
    out = bytearray(batch)
    struct.pack_into(">i", out, _LAST_OFFSET_DELTA, delta)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


def empty_batch(base_offset: int, last_offset_delta: int) -> bytes:
    """A 61-byte batch with recordCount 0: an idempotent producer's last batch whose
    records were all cleaned away (Kafka keeps it so the producer's sequence survives)."""
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out, 0,
        base_offset, HEADER_SIZE - LOG_OVERHEAD, 0, 2, 0, 0, last_offset_delta,
        1_700_000_000_000, 1_700_000_000_000, 4242, 0, 17, 0,
    )  # fmt: skip
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


def compacted_log() -> bytes:
    """Offsets 0..29 after cleaning: records left at 0, 3, 7 | 9 (batch claims up to 12)
    | empty 13..15 | marker 16 | 20, 21 (gzip) | 27 (batch claims up to 29)."""
    first = build_batch(
        [Record(b"a", b"a1"), Record(b"b", b"b1"), Record(b"a", b"a2")],
        base_offset=0,
        offset_deltas=[0, 3, 7],
    )
    second = with_last_offset_delta(
        build_batch([Record(b"b", None)], base_offset=9, offset_deltas=[0]), 3
    )
    marker = build_control_batch(
        ControlType.COMMIT, producer_id=7, producer_epoch=0, base_offset=16, timestamp=1
    )
    third = build_batch(
        [Record(b"c", b"c1"), Record(None, b"no key")],
        base_offset=20,
        offset_deltas=[0, 1],
        compression=Compression.GZIP,
    )
    fourth = with_last_offset_delta(
        build_batch([Record(b"b", b"b2")], base_offset=27, offset_deltas=[0]), 2
    )
    return first + second + empty_batch(13, 2) + marker + third + fourth


def test_a_cleaned_log_decodes_into_its_changes_and_the_position_after_it() -> None:
    changes = decode_changes(compacted_log(), partition=3, position=0)
    assert changes.partition == 3
    assert changes.keys == [b"a", b"b", b"a", b"b", b"c", b"b"]
    assert changes.values == [b"a1", b"b1", b"a2", None, b"c1", b"b2"]
    assert changes.offsets == [0, 3, 7, 9, 20, 27]
    assert changes.tombstones == [3]
    assert changes.keyless == 1
    # The last batch's last record is 27, its lastOffsetDelta says 29: reading goes on
    # at 30, not 28, or the reader would fetch that batch again forever.
    assert changes.next_offset == 30


def test_the_position_moves_past_gaps_and_an_empty_batch_alone() -> None:
    alone = empty_batch(13, 2)
    assert parse_header(alone).record_count == 0
    changes = decode_changes(alone, partition=0, position=13)
    assert len(changes) == 0
    assert changes.next_offset == 16
    gap_only = with_last_offset_delta(
        build_batch([Record(b"k", b"v")], base_offset=40, offset_deltas=[0]), 9
    )
    changes = decode_changes(gap_only, partition=0, position=45)
    assert len(changes) == 0  # offset 40 is before the position
    assert changes.next_offset == 50


def test_changes_before_the_position_are_left_out() -> None:
    changes = decode_changes(compacted_log(), partition=0, position=8)
    assert changes.offsets == [9, 20, 27]
    assert changes.tombstones == [0]
    assert changes.next_offset == 30


def test_a_partial_batch_at_the_end_is_read_next_time() -> None:
    log = compacted_log()
    cut = len(log) - 10
    size, next_offset = whole_batches_next_offset(log[:cut], 0)
    changes = decode_changes(log[:cut], partition=0, position=0)
    assert changes.offsets == [0, 3, 7, 9, 20]
    assert changes.next_offset == next_offset == 22
    rest = decode_changes(log[size:], partition=0, position=next_offset)
    assert rest.offsets == [27]
    assert rest.next_offset == 30


def test_nothing_whole_leaves_the_position_where_it_was() -> None:
    changes = decode_changes(compacted_log()[:30], partition=0, position=5)
    assert len(changes) == 0
    assert changes.next_offset == 5
