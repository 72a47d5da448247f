"""tierlog.records.validate: the one validator of appended batches, what it clears from
headers alone, and what it leaves to ``decode`` (bounded in time by a budget and in memory
by pieces)."""

from __future__ import annotations

import gzip
import random
import struct
import tracemalloc
import zlib

import pytest

from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import (
    CorruptBatchError,
    DecompressedTooLargeError,
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from tierlog.records.header import HEADER_SIZE, Compression, compute_crc
from tierlog.records.validate import (
    AppendRules,
    Origin,
    RequestBudget,
    complete,
    decode,
    validate,
)

RULES = AppendRules(max_batch_bytes=1 << 30, max_append_bytes=1 << 30)
COMPACTED = AppendRules(max_batch_bytes=1 << 30, max_append_bytes=1 << 30, keys_required=True)
MIB = 1 << 20


def with_block(batch: bytes, block: bytes, count: int | None = None) -> bytes:
    """``batch`` with its records block replaced by ``block`` (and its record count set),
    length and CRC made right again: a lie the header cannot show."""
    out = bytearray(batch[:HEADER_SIZE]) + block
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 23, count - 1)
        struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, compute_crc(out))
    return bytes(out)


def records_block(values: list[bytes], keyed: bool = True) -> bytes:
    return build_batch([Record(b"k" if keyed else None, v) for v in values])[HEADER_SIZE:]


def zstd_frames(data: bytes, content_size: bool) -> bytes:
    import zstandard

    return bytes(zstandard.ZstdCompressor(write_content_size=content_size).compress(data))


def test_honest_batches_need_nothing_decoded() -> None:
    batches = [
        build_batch([Record(b"k", b"v" * 100)] * 50),
        build_batch([Record(b"k", b"v" * 100)] * 50, compression=Compression.GZIP),
        build_batch([Record(b"k", b"v" * 100)] * 50, compression=Compression.ZSTD),
        build_batch([Record(b"k", b"v" * 100)] * 50, compression=Compression.LZ4),
        build_batch([Record(b"k", b"v" * 100)] * 50, compression=Compression.SNAPPY),
    ]
    checked = validate(b"".join(batches), RULES)
    assert not checked.needs_decoding and not checked.crc_pending
    assert (len(checked.headers), checked.record_count) == (5, 250)


def test_a_zstd_frame_without_its_size_is_cleared_by_its_block_headers() -> None:
    """Java clients write zstd frames without a content size. Their block headers bound
    the output (raw blocks exactly, compressed ones at 128 KiB), so nothing is decoded;
    when the walk is over the request's budget, the block is decoded instead."""
    rng = random.Random(1)
    values = [rng.randbytes(300) * 10 for _ in range(3000)]  # 9 MB, compressible
    base = build_batch([Record(b"k", b"x")], compression=Compression.ZSTD)
    batch = with_block(base, zstd_frames(records_block(values), False), 3000)
    assert not validate(batch, RULES).needs_decoding
    budget = RequestBudget(walk_blocks=10)
    checked = validate(batch, RULES, budget=budget)
    assert checked.needs_decoding and budget.walk_blocks <= 0
    spent = decode(checked, budget)
    assert checked.decoded and spent > 9_000_000


def test_a_zstd_bomb_of_rle_blocks_is_refused_from_its_block_headers() -> None:
    """The issue's case: a zstd frame that does not state its size, 300 MiB of zeros in a
    few KB. Its RLE blocks state their output: refused without decompressing a byte."""
    bomb = zstd_frames(bytes(300 * MIB), content_size=False)
    assert len(bomb) < 20_000
    batch = with_block(build_batch([Record(b"k", b"v")] * 3, compression=Compression.ZSTD), bomb)
    with pytest.raises(DecompressedTooLargeError, match="at least"):
        validate(batch, RULES)


def test_a_bomb_of_valid_records_is_refused_by_decode_within_the_limit() -> None:
    """Records that are well formed, each 100 MiB of one byte pattern that zstd codes as
    compressed blocks (so the headers only bound it): decoding stops at 256 MiB."""
    pattern = bytes(range(256)) * 4096  # 1 MiB, compressed blocks rather than RLE
    block = records_block([pattern * 100] * 3)
    base = build_batch([Record(b"k", b"v")], compression=Compression.ZSTD)
    batch = with_block(base, zstd_frames(block, False), 3)
    del block
    checked = validate(batch, RULES)
    assert checked.needs_decoding
    with pytest.raises(DecompressedTooLargeError, match="more than 268435456 bytes"):
        decode(checked, RequestBudget())


def test_decoding_holds_one_piece_at_a_time() -> None:
    """Four gzip bombs at once took a broker to 1.4 GB when each was decompressed whole.
    Decoding in pieces holds ~one piece, whatever the block expands to."""
    block = records_block([bytes(MIB)] * 200)  # 200 MiB of records in one gzip member
    member = zlib.compressobj(6, zlib.DEFLATED, 31)
    packed = member.compress(block) + member.flush()
    del block
    # Its ISIZE states 200 MiB, true: the stated-size check lets it through. On a
    # compacted topic every record is read for its key.
    base = build_batch([Record(b"k", b"v")], compression=Compression.GZIP)
    checked = validate(with_block(base, packed, 200), COMPACTED)
    assert checked.needs_decoding
    tracemalloc.start()
    try:
        decode(checked, RequestBudget())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB, f"decoding 200 MiB held {peak / MIB:.1f} MiB"


def test_a_gzip_member_lying_about_its_size_is_decoded_and_refused() -> None:
    """ISIZE is the last four bytes of a gzip member: a bomb can state anything there.
    Past the expansion bound it proves nothing, so the block is decoded."""
    block = records_block([bytes(MIB)] * 300)
    packed = bytearray(gzip.compress(block, mtime=0))
    del block
    packed[-4:] = struct.pack("<I", 1000)  # "1,000 bytes"
    base = build_batch([Record(b"k", b"v")], compression=Compression.GZIP)
    batch = with_block(base, bytes(packed), 300)
    checked = validate(batch, RULES)
    assert checked.needs_decoding
    with pytest.raises(DecompressedTooLargeError):
        decode(checked, RequestBudget())


def test_the_budget_is_the_whole_requests() -> None:
    """Each batch alone is fine; together they pass the request's budget."""
    batch = build_batch([Record(b"k", bytes(100_000))] * 4, compression=Compression.GZIP)
    budget = RequestBudget(decode_bytes=MIB)
    first = validate(batch, COMPACTED)
    assert first.needs_decoding  # a compacted topic's keys
    assert decode(first, budget) > 400_000
    with pytest.raises(DecompressedTooLargeError, match="more than 1048576 bytes"):
        decode(validate(batch + batch, COMPACTED), budget)


def test_keys_are_required_on_a_compacted_topic_only() -> None:
    keyless = build_batch([Record(b"k", b"v"), Record(None, b"v")], compression=Compression.LZ4)
    with pytest.raises(InvalidRecordError, match="without a key"):
        decode(validate(keyless, COMPACTED))
    assert not validate(keyless, RULES).needs_decoding
    plain = build_batch([Record(None, b"v")])
    with pytest.raises(InvalidRecordError, match="without a key"):
        decode(validate(plain, COMPACTED))


def test_a_decoded_count_that_is_not_the_headers_is_refused() -> None:
    block = records_block([b"v" * 50] * 5)
    packed = gzip.compress(block, mtime=0)
    liar = with_block(build_batch([Record(b"k", b"v")] * 3, compression=Compression.GZIP), packed)
    with pytest.raises(InvalidRecordError, match="declares 3 records but holds 5"):
        decode(validate(liar, COMPACTED))


def test_client_rules_and_sizes() -> None:
    batch = build_batch([Record(b"k", b"v" * 100)] * 3)
    small = AppendRules(max_batch_bytes=100, max_append_bytes=1 << 30)
    with pytest.raises(RecordTooLargeError):
        validate(batch, small)
    with pytest.raises(RecordBatchTooLargeError):
        validate(batch + batch, AppendRules(max_batch_bytes=1 << 20, max_append_bytes=600))
    control = build_batch([Record(b"\0\0\0\1", b"")], control=True)
    with pytest.raises(InvalidRecordError, match="control"):
        validate(control, RULES)
    assert validate(control, RULES, Origin.REPLICATION).headers
    flipped = bytearray(batch)
    flipped[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate(bytes(flipped), RULES)
    no_sequence = build_batch([Record(b"k", b"v")], producer_id=7, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate(no_sequence, RULES)
    assert validate(no_sequence, RULES, Origin.COORDINATOR).headers


def test_a_large_batchs_crc_can_be_left_for_later() -> None:
    batch = bytearray(build_batch([Record(b"k", bytes(1000))] * 400))
    batch[-1] ^= 1  # its CRC is wrong: found when completed, not before
    checked = validate(bytes(batch), RULES, crc_later_from=256 * 1024)
    assert checked.crc_pending
    with pytest.raises(CorruptBatchError, match="CRC"):
        complete(checked)
