"""tierlog.records.recompress: a batch's records re-encoded in a topic's codec, its header
kept but for the codec bits, length and CRC; and validate's ``recompress`` step around it
(Kafka's LogValidator with compression.type other than producer)."""

from __future__ import annotations

import itertools
import os
import struct

import pytest

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.errors import CorruptBatchError, InvalidRecordError, RecordTooLargeError
from tierlog.records.header import (
    HEADER_SIZE,
    Attr,
    Compression,
    compute_crc,
    parse_header,
    validate_batch,
)
from tierlog.records.reader import decode_batch
from tierlog.records.recompress import (
    TargetCompression,
    needs_recompression,
    recompress_batch,
)
from tierlog.records.validate import AppendRules, RequestBudget, prepare, validate

CODECS = list(Compression)
LIMIT = 64 << 20


def records(n: int = 20) -> list[Record]:
    return [
        Record(
            key=b"key-%d" % i if i % 5 else None,
            value=b"value %d " % i * 20 if i % 7 else None,
            headers=(("trace", b"t%d" % i), ("empty", None)),
            timestamp=1_700_000_000_000 + i * 3 - (i % 4),  # not monotonic: max != last
        )
        for i in range(n)
    ]


def idempotent_batch(codec: Compression, *, transactional: bool = False) -> bytes:
    return build_batch(
        records(),
        compression=codec,
        producer_id=4711,
        producer_epoch=3,
        base_sequence=42,
        transactional=transactional,
    )


@pytest.mark.parametrize(("source", "target"), list(itertools.permutations(CODECS, 2)))
def test_every_codec_pair_keeps_the_records_and_the_header(
    source: Compression, target: Compression
) -> None:
    batch = idempotent_batch(source, transactional=True)
    before = parse_header(batch)
    done = recompress_batch(batch, before, TargetCompression(target), max_decompressed_bytes=LIMIT)
    after = validate_batch(done.batch)  # CRC right, length whole
    assert after.attributes & Attr.COMPRESSION_MASK == target
    assert after.attributes & ~Attr.COMPRESSION_MASK == before.attributes & ~Attr.COMPRESSION_MASK
    for field in (
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
        "last_offset_delta",
        "partition_leader_epoch",
    ):
        assert getattr(after, field) == getattr(before, field), field
    assert after.is_transactional
    assert decode_batch(done.batch)[1] == decode_batch(batch)[1]


def test_an_uncompressed_control_batch_stays_uncompressed() -> None:
    marker = build_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0, timestamp=1)
    attributes = parse_header(marker).attributes
    assert not needs_recompression(attributes, TargetCompression(Compression.ZSTD))
    data = parse_header(build_batch(records(2))).attributes
    assert needs_recompression(data, TargetCompression(Compression.ZSTD))
    assert not needs_recompression(data, TargetCompression(Compression.NONE))
    assert not needs_recompression(data, None)  # producer


def test_a_higher_gzip_level_gives_a_batch_no_larger() -> None:
    text = [
        Record(b"k", b" ".join(b"word%d" % (i * j % 97) for j in range(200))) for i in range(50)
    ]
    batch = build_batch(text)
    header = parse_header(batch)
    sizes = [
        len(
            recompress_batch(
                batch,
                header,
                TargetCompression(Compression.GZIP, level),
                max_decompressed_bytes=LIMIT,
            ).batch
        )
        for level in (1, 9)
    ]
    assert sizes[1] <= sizes[0]
    zstd = [
        len(
            recompress_batch(
                batch,
                header,
                TargetCompression(Compression.ZSTD, level),
                max_decompressed_bytes=LIMIT,
            ).batch
        )
        for level in (-50, 19)
    ]
    assert zstd[1] < zstd[0]


def test_a_block_that_does_not_decode_is_corrupt() -> None:
    batch = bytearray(build_batch(records(), compression=Compression.GZIP))
    batch[HEADER_SIZE + 20 : HEADER_SIZE + 30] = b"\xff" * 10
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    with pytest.raises(CorruptBatchError):
        recompress_batch(
            batch,
            parse_header(batch),
            TargetCompression(Compression.ZSTD),
            max_decompressed_bytes=LIMIT,
        )


def test_a_count_that_is_not_the_headers_is_invalid() -> None:
    batch = bytearray(build_batch(records(), compression=Compression.LZ4))
    struct.pack_into(">i", batch, 57, 19)  # recordCount one short
    struct.pack_into(">i", batch, 23, 18)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    with pytest.raises(InvalidRecordError, match="declares 19 records"):
        recompress_batch(
            batch,
            parse_header(batch),
            TargetCompression(Compression.NONE),
            max_decompressed_bytes=LIMIT,
        )


def test_validate_flags_only_batches_in_another_codec() -> None:
    zstd = AppendRules(1 << 30, 1 << 30, compression=TargetCompression(Compression.ZSTD))
    assert validate(build_batch(records()), zstd).needs_recompression
    assert not validate(
        build_batch(records(), compression=Compression.ZSTD), zstd
    ).needs_recompression
    producer = AppendRules(1 << 30, 1 << 30)
    assert not validate(build_batch(records()), producer).needs_recompression


def test_prepare_recompresses_each_batch_of_a_request() -> None:
    rules = AppendRules(1 << 30, 1 << 30, compression=TargetCompression(Compression.SNAPPY))
    first = build_batch(records(), compression=Compression.GZIP)
    same = build_batch(records(3), compression=Compression.SNAPPY)
    last = build_batch(records(5))
    batches = validate(first + same + last, rules)
    budget = RequestBudget()
    spent = prepare(batches, budget)
    assert spent > 0 and budget.decode_bytes == RequestBudget().decode_bytes - spent
    assert not batches.needs_recompression
    assert [h.attributes & Attr.COMPRESSION_MASK for h in batches.headers] == [2, 2, 2]
    assert batches.size == len(batches.records) == sum(h.size for h in batches.headers)
    view = bytes(batches.records)
    assert view[len(view) - batches.headers[-1].size :] != last
    pos = 0
    for header, original in zip(batches.headers, (first, same, last), strict=True):
        assert decode_batch(view, pos)[1] == decode_batch(original)[1]
        pos += header.size
    # The batch already in snappy is kept byte for byte.
    start = batches.headers[0].size
    assert view[start : start + len(same)] == same


def test_a_recompressed_batch_past_max_message_bytes_is_refused() -> None:
    noise = [Record(None, os.urandom(4000)) for _ in range(4)]
    batch = build_batch(noise)
    rules = AppendRules(
        max_batch_bytes=len(batch) + 5,
        max_append_bytes=1 << 30,
        compression=TargetCompression(Compression.GZIP),
    )
    batches = validate(batch, rules)  # fits as sent
    with pytest.raises(RecordTooLargeError, match=r"GZIP exceeds max\.message\.bytes"):
        prepare(batches)


def test_compacted_topic_keys_are_checked_while_recompressing() -> None:
    rules = AppendRules(
        1 << 30, 1 << 30, keys_required=True, compression=TargetCompression(Compression.ZSTD)
    )
    batches = validate(build_batch(records(), compression=Compression.GZIP), rules)
    with pytest.raises(InvalidRecordError, match="without a key"):
        prepare(batches)
