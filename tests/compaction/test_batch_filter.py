"""Rewriting a batch with a subset of its records: offsets, codec and producer fields
stay; a delete horizon re-bases timestamps without changing them; Kafka's own record
code (kafka-python) reads the result."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tierlog.compaction.batch_filter import (
    empty_batch,
    rebuild_batch,
    rebuild_parts,
    walk_records,
)
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Attr, Compression, validate_batch
from tierlog.records.reader import decode_batch

T0 = 1_700_000_000_000


def _batch(codec: Compression) -> bytes:
    records = [
        Record(
            b"k%d" % i,
            None if i % 3 == 0 else b"v" * i,
            headers=(("h", b"x"),) if i == 2 else (),
            timestamp=T0 + 10 * i,
        )
        for i in range(10)
    ]
    return build_batch(
        records,
        base_offset=500,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=5,
    )


@pytest.mark.parametrize("codec", list(Compression))
def test_kept_records_keep_offsets_timestamps_and_the_batch_its_fields(codec: Compression) -> None:
    original = _batch(codec)
    header = validate_batch(original)
    records = walk_records(original, header)
    assert records.keys[:2] == [b"k0", b"k1"]
    assert records.tombstones[:4] == [True, False, False, True]

    rebuilt = rebuild_batch(header, records, [1, 2, 5, 9])
    new, decoded = decode_batch(rebuilt)  # CRC checked
    assert [(r.offset, r.key, r.timestamp) for r in decoded] == [
        (501, b"k1", T0 + 10),
        (502, b"k2", T0 + 20),
        (505, b"k5", T0 + 50),
        (509, b"k9", T0 + 90),
    ]
    assert decoded[1].headers == (("h", b"x"),)
    assert (new.base_offset, new.last_offset) == (header.base_offset, header.last_offset)
    assert new.compression == codec
    assert (new.producer_id, new.producer_epoch, new.base_sequence) == (42, 3, 17)
    assert new.partition_leader_epoch == 5
    assert new.record_count == 4
    assert new.max_timestamp == T0 + 90


def test_a_delete_horizon_rebases_timestamps_without_changing_them() -> None:
    original = _batch(Compression.NONE)
    header = validate_batch(original)
    horizon = T0 + 86_400_000
    rebuilt = rebuild_batch(header, walk_records(original, header), [0, 3], horizon)
    new, decoded = decode_batch(rebuilt)
    assert new.attributes & Attr.DELETE_HORIZON
    assert new.base_timestamp == horizon
    assert [(r.offset, r.value, r.timestamp) for r in decoded] == [
        (500, None, T0),
        (503, None, T0 + 30),
    ]
    # Kafka's own record code agrees (negative timestamp deltas included).
    kafka_batch = DefaultRecordBatch(bytearray(rebuilt))
    assert kafka_batch.validate_crc()
    assert [(r.offset, r.timestamp, r.value) for r in kafka_batch] == [
        (500, T0, None),
        (503, T0 + 30, None),
    ]


def test_an_empty_batch_keeps_the_producers_last_sequence() -> None:
    original = _batch(Compression.ZSTD)
    header = validate_batch(original)
    empty, decoded = decode_batch(empty_batch(header))
    assert decoded == []
    assert empty.record_count == 0
    assert empty.last_offset == header.last_offset
    assert empty.last_sequence == header.last_sequence
    assert empty.compression == Compression.NONE


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_the_pieces_of_a_rebuilt_batch_are_the_rebuilt_batch(codec: Compression) -> None:
    original = _batch(codec)
    header = validate_batch(original)
    records = walk_records(original, header)
    for keep in ([1], [0, 9], [2, 3, 4, 8], list(range(10))):
        parts, size, max_timestamp = rebuild_parts(header, records, keep)
        joined = b"".join(parts)
        assert joined == rebuild_batch(header, records, keep)
        assert size == len(joined)
        assert max_timestamp == validate_batch(joined).max_timestamp
