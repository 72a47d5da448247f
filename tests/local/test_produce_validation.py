"""Issue 10, items 5 and 6: what ``Log.append`` checks of a producer's batch beyond its
header and CRC: an uncompressed batch's records against its declared count, a compressed
batch's declared sizes."""

from __future__ import annotations

import gzip
import random
import struct

import pytest

from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import CorruptBatchError, DecompressedTooLargeError, InvalidRecordError
from tierlog.records.header import HEADER_SIZE, Compression, compute_crc

from .conftest import LogFactory, assert_dense, make_batch


def reseal(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return bytes(batch)


def claiming(batch: bytes, count: int) -> bytes:
    """``batch`` with recordCount and lastOffsetDelta changed to ``count`` and a valid CRC."""
    out = bytearray(batch)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    return reseal(out)


@pytest.mark.parametrize("value_size", [10, 300_000])  # the inline and worker-thread paths
def test_a_batch_claiming_more_records_than_it_holds_is_refused(
    make_log: LogFactory, value_size: int
) -> None:
    lg: Log = make_log()
    lg.append(make_batch(2))
    liar = claiming(make_batch(3, value_size=value_size), 1_000_000)
    with pytest.raises(InvalidRecordError, match="declares 1000000 records"):
        lg.append(liar)
    assert lg.log_end_offset == 2
    assert lg.active_segment.size == len(make_batch(2))
    fewer = claiming(make_batch(3, value_size=value_size), 2)
    with pytest.raises(InvalidRecordError, match="holds 3 records"):
        lg.append(fewer)
    assert lg.log_end_offset == 2
    lg.append(make_batch(3, value_size=value_size))
    assert lg.log_end_offset == 5
    assert_dense(lg)


def test_records_that_do_not_fill_the_batch_are_refused(make_log: LogFactory) -> None:
    lg: Log = make_log()
    batch = bytearray(make_batch(3))
    batch += b"\x00" * 5  # trailing bytes after the last record
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(InvalidRecordError, match="do not fill"):
        lg.append(reseal(batch))
    assert lg.log_end_offset == 0


def test_the_general_path_checks_every_batch(make_log: LogFactory) -> None:
    """Two batches in one request (the general append path, not the single-batch one)."""
    lg: Log = make_log()
    good = make_batch(2)
    liar = claiming(make_batch(2), 50)
    with pytest.raises(InvalidRecordError):
        lg.append(good + liar)
    assert lg.log_end_offset == 0
    lg.append(good + make_batch(2))
    assert lg.log_end_offset == 4


NOISE = random.Random(1).randbytes(950_000)  # incompressible: a big block, a big bound


def gzip_stating(size: int, data: bytes = NOISE) -> bytes:
    """A gzip records block that states ``size`` bytes decompressed (its ISIZE)."""
    return gzip.compress(data, mtime=0)[:-4] + struct.pack("<I", size)


def compressed_batch(codec: Compression, count: int, block: bytes) -> bytes:
    base = bytearray(build_batch([Record(b"k", b"v")] * count, compression=codec))
    out = base[:HEADER_SIZE] + block
    struct.pack_into(">i", out, 8, len(out) - 12)
    return reseal(out)


def test_a_compressed_batch_with_an_impossible_record_count_is_refused(
    make_log: LogFactory,
) -> None:
    lg: Log = make_log()
    real = build_batch([Record(b"k", b"v")] * 3, compression=Compression.ZSTD)
    with pytest.raises(CorruptBatchError, match="expand to at most"):
        lg.append(claiming(real, 50_000_000))
    assert lg.log_end_offset == 0


def test_a_compressed_block_stating_more_than_a_reader_decompresses_is_refused(
    make_log: LogFactory,
) -> None:
    lg: Log = make_log()
    import zstandard

    # A zstd frame stating 4 GiB of content (the zstd bomb of the issue: 131 KB -> 4 GiB).
    chunker = zstandard.ZstdCompressor(write_content_size=True).compressobj(size=4 << 30)
    block = chunker.compress(NOISE) + chunker.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    with pytest.raises(DecompressedTooLargeError, match="4294967296 bytes decompressed"):
        lg.append(compressed_batch(Compression.ZSTD, 3, block))
    # The gzip bomb of the issue: 917 KB stating 900 MiB.
    with pytest.raises(DecompressedTooLargeError):
        lg.append(compressed_batch(Compression.GZIP, 3, gzip_stating(900 << 20)))
    # More than the block's bytes can expand to: a lie, whatever the limit.
    zeros = zstandard.ZstdCompressor().compressobj(size=4 << 30)
    tiny = zeros.compress(bytes(1 << 20)) + zeros.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    with pytest.raises(CorruptBatchError, match="expand to at most"):
        lg.append(compressed_batch(Compression.ZSTD, 3, tiny))
    with pytest.raises(CorruptBatchError, match="expand to at most"):
        lg.append(compressed_batch(Compression.GZIP, 3, gzip_stating(900 << 20, b"x")))
    assert lg.log_end_offset == 0
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        lg.append(build_batch([Record(b"k", b"v" * 100)] * 50, compression=codec))
    assert lg.log_end_offset == 200
