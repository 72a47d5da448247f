"""Tests for tierlog.records.codecs: framing, round trips, corrupt input, bombs."""

from __future__ import annotations

import gzip
import random
import struct
import subprocess
import sys
import threading

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records import codecs
from tierlog.records.codecs import XERIAL_MAGIC, compress, decompress
from tierlog.records.errors import CorruptBatchError, UnsupportedCompressionError
from tierlog.records.header import Compression

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
SAMPLE = b"".join(b"record %d payload " % i for i in range(5000)) + random.Random(0).randbytes(3000)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    if codec is not Compression.NONE:
        assert len(packed) < len(SAMPLE)
    assert decompress(codec, packed) == SAMPLE
    assert decompress(int(codec), memoryview(packed)) == SAMPLE
    assert decompress(codec, bytearray(packed)) == SAMPLE


@pytest.mark.parametrize("codec", CODECS)
def test_empty_round_trip(codec: Compression) -> None:
    assert decompress(codec, compress(codec, b"")) == b""


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=70_000))
def test_round_trip_property(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("bits", [5, 6, 7])
def test_unknown_codec_bits(bits: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {bits}"):
        decompress(bits, b"abc")
    with pytest.raises(UnsupportedCompressionError):
        compress(bits, b"abc")


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\xff" * 7, bytes(range(256)) * 3])
def test_garbage_is_corrupt(codec: Compression, garbage: bytes) -> None:
    if codec is Compression.SNAPPY and garbage == b"\x00":
        # A raw snappy block of length 0 is exactly one zero byte: valid and empty.
        assert decompress(codec, garbage) == b""
        return
    with pytest.raises(CorruptBatchError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_is_corrupt(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    for cut in (1, 4, len(packed) // 2, len(packed) - 17):
        with pytest.raises(CorruptBatchError):
            decompress(codec, packed[:-cut])


@pytest.mark.parametrize(
    ("codec", "position", "value"),
    [
        (Compression.GZIP, 2, 7),  # compression method other than deflate
        (Compression.SNAPPY, 21, 0xFF),  # first block: raw length prefix vs content
        (Compression.LZ4, 4, 0x62),  # frame descriptor with a reserved bit set
        (Compression.ZSTD, 4, 0x0F),  # frame header descriptor: reserved bit set
    ],
)
def test_library_exceptions_are_wrapped(codec: Compression, position: int, value: int) -> None:
    packed = bytearray(compress(codec, SAMPLE))
    packed[position] = value
    with pytest.raises(CorruptBatchError, match="corrupt") as caught:
        decompress(codec, bytes(packed))
    # The library's own exception is kept as the cause, for debugging.
    assert caught.value.__cause__ is not None
    assert not isinstance(caught.value.__cause__, CorruptBatchError)


def test_lz4_and_zstd_without_checksums_do_not_notice_flipped_literals() -> None:
    # Why the batch CRC matters: Kafka's LZ4 and zstd frames carry no content checksum,
    # so damaged literals decode "successfully" into different bytes.
    for codec in (Compression.LZ4, Compression.ZSTD):
        packed = bytearray(compress(codec, SAMPLE))
        packed[-100] ^= 0x01
        assert decompress(codec, bytes(packed)) != SAMPLE


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_refused(codec: Compression) -> None:
    zeros = bytes(8 << 20)
    packed = compress(codec, zeros)
    with pytest.raises(CorruptBatchError, match=r"past|limit"):
        decompress(codec, packed, max_size=1 << 20)
    assert len(decompress(codec, packed, max_size=8 << 20)) == 8 << 20
    assert len(decompress(codec, packed, max_size=None)) == 8 << 20


@pytest.mark.parametrize("codec", CODECS)
def test_output_exactly_at_limit_is_accepted(codec: Compression) -> None:
    data = b"z" * 1000
    assert decompress(codec, compress(codec, data), max_size=1000) == data
    with pytest.raises(CorruptBatchError):
        decompress(codec, compress(codec, data), max_size=999)


def test_snappy_writes_xerial_framing_like_the_java_client() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three 32 KiB blocks
    packed = compress(Compression.SNAPPY, data)
    assert packed[:8] == XERIAL_MAGIC == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        blocks.append(snappy.decompress(packed[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [32768, 32768, 76800 - 65536]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks() -> None:
    # librdkafka and some Go clients send one raw snappy block, no xerial header.
    assert decompress(Compression.SNAPPY, snappy.compress(SAMPLE)) == SAMPLE


def test_snappy_reads_little_endian_xerial_version() -> None:
    packed = bytearray(compress(Compression.SNAPPY, SAMPLE))
    packed[8:16] = struct.pack("<ii", 1, 1)  # what some producers write (kafka-python #2414)
    assert decompress(Compression.SNAPPY, bytes(packed)) == SAMPLE


def test_snappy_reads_concatenated_xerial_streams() -> None:
    packed = compress(Compression.SNAPPY, b"one") + compress(Compression.SNAPPY, b"two")
    assert decompress(Compression.SNAPPY, packed) == b"onetwo"


@pytest.mark.parametrize("size", [-1, 1 << 30])
def test_snappy_bad_xerial_block_length(size: int) -> None:
    packed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, size) + b"\x00" * 8
    with pytest.raises(CorruptBatchError, match="overruns"):
        decompress(Compression.SNAPPY, packed)


def test_snappy_refuses_bomb_before_allocating() -> None:
    # A raw block whose length prefix claims 2**32 - 1 bytes but holds nothing.
    claim = b"\xff\xff\xff\xff\x0f"
    with pytest.raises(CorruptBatchError, match="limit"):
        decompress(Compression.SNAPPY, claim + b"\x00")


def test_gzip_reads_concatenated_members_and_zero_padding() -> None:
    packed = gzip.compress(b"abc") + gzip.compress(b"def") + b"\x00" * 4
    assert decompress(Compression.GZIP, packed) == b"abcdef"


def test_gzip_output_is_deterministic() -> None:
    assert compress(Compression.GZIP, SAMPLE) == compress(Compression.GZIP, SAMPLE)


def test_lz4_frame_uses_independent_blocks_without_content_size() -> None:
    packed = compress(Compression.LZ4, SAMPLE)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg >> 6 == 0b01  # version
    assert flg & 0x20  # block independence, as KafkaLZ4BlockOutputStream writes
    assert not flg & 0x08  # no content size
    assert (packed[5] >> 4) & 0x7 == 4  # 64 KiB maximum block size


def test_lz4_reads_frames_from_other_writers() -> None:
    # Default python-lz4 frames (linked blocks, content size) are what kafka-python sends.
    assert decompress(Compression.LZ4, lz4.frame.compress(SAMPLE)) == SAMPLE
    two = lz4.frame.compress(b"ab") + lz4.frame.compress(b"cd")
    assert decompress(Compression.LZ4, two) == b"abcd"


def test_zstd_reads_frames_without_content_size_and_several_frames() -> None:
    streaming = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    assert zstandard.frame_content_size(streaming) == -1
    assert decompress(Compression.ZSTD, streaming) == SAMPLE
    two = zstandard.ZstdCompressor().compress(b"ab") + streaming
    assert decompress(Compression.ZSTD, two) == b"ab" + SAMPLE


def test_zstd_declared_size_is_checked_against_the_limit_and_the_data() -> None:
    sized = zstandard.ZstdCompressor().compress(SAMPLE)
    assert zstandard.frame_content_size(sized) == len(SAMPLE)
    with pytest.raises(CorruptBatchError, match="past"):
        decompress(Compression.ZSTD, sized, max_size=len(SAMPLE) - 1)
    # A frame whose header understates its content is corrupt, whichever path reads it.
    small = zstandard.ZstdCompressor().compress(b"abc" * 100)
    assert small[4] == 0x60  # single segment, 2-byte content size (value - 256) next
    lying = bytearray(small)
    lying[5] -= 1  # declares 299 bytes
    with pytest.raises(CorruptBatchError):
        decompress(Compression.ZSTD, bytes(lying))


def test_zstd_decompressor_reused_after_errors_and_per_thread() -> None:
    packed = compress(Compression.ZSTD, SAMPLE)
    for bad in (packed[:-9], packed[:40], b"\x28\xb5\x2f\xfd" + bytes(20), packed + b"x"):
        with pytest.raises(CorruptBatchError):
            decompress(Compression.ZSTD, bad)
        assert decompress(Compression.ZSTD, packed) == SAMPLE
    results: list[bool] = []

    def work() -> None:
        results.append(all(decompress(Compression.ZSTD, packed) == SAMPLE for _ in range(20)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_zstd_trailing_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptBatchError):
        decompress(Compression.ZSTD, compress(Compression.ZSTD, SAMPLE) + b"junk")


def test_missing_library_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    codecs._load.cache_clear()
    monkeypatch.setitem(sys.modules, "zstandard", None)  # makes the import fail
    try:
        with pytest.raises(UnsupportedCompressionError, match="pip install zstandard"):
            decompress(Compression.ZSTD, b"\x28\xb5\x2f\xfd")
        with pytest.raises(UnsupportedCompressionError, match="pip install zstandard"):
            compress(Compression.ZSTD, b"x")
    finally:
        codecs._load.cache_clear()


def test_codec_libraries_load_lazily() -> None:
    code = (
        "import sys, tierlog.records as r\n"
        "lazy = ('snappy', 'lz4', 'zstandard', 'pyarrow')\n"
        "assert not [m for m in lazy if m in sys.modules], sys.modules.keys()\n"
        "r.decompress(r.Compression.LZ4, r.compress(r.Compression.LZ4, b'x'))\n"
        "assert 'lz4.frame' in sys.modules and 'zstandard' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
