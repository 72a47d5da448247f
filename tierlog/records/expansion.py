"""How far a compressed records block can expand, read without decompressing it.

The produce path does not decompress (DESIGN.md principle 2), yet it must refuse blocks
no reader could decompress: a few KB of zstd can claim gigabytes, and a consumer stalls
at such a batch's offset for good. What a block's bytes say without decompressing them:

* how far its codec can expand one byte at most (``MAX_EXPANSION``): a block that cannot
  reach a limit needs no further look;
* the size its framing states (``declared_size``: a zstd frame's content size, a gzip
  member's ISIZE, snappy's length prefixes, an lz4 frame's content size), checked against
  what the bytes can expand to and against the limit (``check_declared_sizes``);
* for zstd, what its frames' block headers bound (``zstd_output_bound``): raw and RLE
  blocks state their output, a compressed block yields at most 128 KiB.

``tierlog.records.validate`` decides from these what must still be decoded. Sans-I/O.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from tierlog.records.codecs import (
    INT32,
    XERIAL_HEADER_SIZE,
    XERIAL_MAGIC,
    ZSTD_MAGIC,
    ZSTD_MAX_RATIO,
    BytesLike,
    codec_of,
    snappy_raw_length,
)
from tierlog.records.errors import CorruptBatchError, DecompressedTooLargeError
from tierlog.records.header import Compression

# The most output one input byte can give, per codec; past it a declared size is a lie.
# deflate: a 258-byte match coded in about two bits (zlib's technical notes: 1032:1).
# snappy: a 3-byte copy element yields at most 64 bytes. lz4: each 0xFF length byte adds
# 255. zstd: see ZSTD_MAX_RATIO.
MAX_EXPANSION: dict[int, int] = {  # keyed by the codec bits (Compression is an IntEnum)
    Compression.GZIP: 1032,
    Compression.SNAPPY: 22,
    Compression.LZ4: 255,
    Compression.ZSTD: ZSTD_MAX_RATIO,
}
# Fixed costs (frame headers, a tiny block) that make ratios meaningless for a few bytes.
EXPANSION_SLACK = 1024
# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength,
# valueLength, headers count, one byte each (reader.MIN_RECORD_SIZE).
_MIN_RECORD_SIZE = 7


def declared_size(codec: Compression | int, block: BytesLike) -> int | None:
    """The decompressed size a compressed records block states in its own framing, read
    from a few bytes without decompressing: a zstd frame's content size (first frame), a
    gzip member's ISIZE (last member; mod 2**32), a raw snappy block's length prefix, the
    xerial blocks' length prefixes summed, an lz4 frame's content size. None when the
    format does not say (a zstd or lz4 frame written without it)."""
    view = memoryview(block)
    kind = codec_of(codec)
    try:
        if kind is Compression.ZSTD:
            return _zstd_content_size(view)
        if kind is Compression.GZIP:
            return struct.unpack("<I", view[-4:])[0] if len(view) >= 18 else None
        if kind is Compression.SNAPPY:
            if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
                return snappy_raw_length(view)
            total, pos = 0, XERIAL_HEADER_SIZE
            while pos + 4 <= len(view):
                (length,) = INT32.unpack_from(view, pos)
                if length < 0:
                    return None  # malformed: decompression says how
                total += snappy_raw_length(view[pos + 4 : pos + 4 + length])
                pos += 4 + length
            return total
        if kind is Compression.LZ4:
            # Frame descriptor: FLG bit 3 says an 8-byte content size follows FLG, BD.
            if len(view) >= 14 and view[4] & 0x08:
                return int.from_bytes(view[6:14], "little")
            return None
    except (CorruptBatchError, struct.error, IndexError):
        return None
    return None


def _zstd_content_size(view: memoryview) -> int | None:
    if len(view) < 6 or view[:4] != ZSTD_MAGIC:
        return None
    descriptor = view[4]
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or pos + size > len(view):
        return None
    value = int.from_bytes(view[pos : pos + size], "little")
    return value + 256 if size == 2 else value


def check_declared_sizes(
    codec: Compression | int, block: BytesLike, record_count: int, max_size: int
) -> None:
    """Refuse a compressed batch whose sizes cannot be true, before anything decompresses
    it (issue 10, item 6): more records than the block could expand to, or a stated
    decompressed size beyond what the block could expand to or beyond ``max_size`` (what
    tierlog's own readers decompress, ``DEFAULT_MAX_SIZE``; Kafka consumers would stall
    on it).

    Raises:
        CorruptBatchError: the header's count or the framing's size is impossible.
        DecompressedTooLargeError: the framing states more than ``max_size`` bytes.
    """
    kind = codec_of(codec)
    if kind is Compression.NONE:
        return
    most = len(block) * MAX_EXPANSION[kind] + EXPANSION_SLACK
    least = record_count * _MIN_RECORD_SIZE
    if least > most:
        raise CorruptBatchError(
            f"{kind.name} batch declares {record_count} records, but {len(block)} "
            f"compressed bytes expand to at most {most}"
        )
    stated = declared_size(kind, block)
    if stated is None:
        return
    if stated > most:
        raise CorruptBatchError(
            f"{kind.name} records block states {stated} bytes decompressed; {len(block)} "
            f"compressed bytes expand to at most {most}"
        )
    if stated > max_size:
        raise DecompressedTooLargeError(
            f"{kind.name} records block states {stated} bytes decompressed, more than the "
            f"{max_size} bytes a reader of this broker decompresses"
        )


# -- zstd output bound from the frame's block headers (no decompression) -----------------

# A zstd block never decompresses past 128 KiB (RFC 8878, Block_Maximum_Size).
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_SKIPPABLE = 0x184D2A50  # low nibble free: 0x184D2A50..5F


class ZstdBound(NamedTuple):
    """What ``zstd_output_bound`` found: ``exact`` bytes the raw and RLE blocks produce,
    at most ``bound`` bytes in all (None: it cannot say), ``blocks`` headers walked."""

    exact: int
    bound: int | None
    blocks: int


def zstd_output_bound(block: BytesLike, max_blocks: int) -> ZstdBound:
    """How much a zstd records block can decompress to, from its frames' block headers
    only: raw and RLE blocks state their output, a compressed block produces at most
    128 KiB, and a frame that states its content size produces no more (decoders enforce
    it). A few KB of RLE blocks that expand to gigabytes are thus measured without
    decompressing a byte.

    ``bound`` is None when this cannot say: a frame it does not understand (the decoder
    will), more than ``max_blocks`` block headers (each is a Python step; past that,
    decompressing off the event loop is cheaper to bound), or a block past the end.
    """
    view = memoryview(block)
    end = len(view)
    pos = exact = bound = blocks = 0
    while pos < end:
        if end - pos < 8:
            return ZstdBound(exact, None, blocks)
        magic = int.from_bytes(view[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            pos += 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
            continue
        if view[pos : pos + 4] != ZSTD_MAGIC:
            return ZstdBound(exact, None, blocks)
        descriptor = view[pos + 4]
        fcs_flag, single = descriptor >> 6, (descriptor >> 5) & 1
        checksum, dict_flag = (descriptor >> 2) & 1, descriptor & 3
        fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
        header = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
        if pos + header + fcs_size > end:
            return ZstdBound(exact, None, blocks)
        stated = None
        if fcs_size:
            stated = int.from_bytes(view[pos + header : pos + header + fcs_size], "little")
            stated += 256 if fcs_size == 2 else 0
        pos += header + fcs_size
        frame_exact = frame_bound = 0
        while True:
            if blocks >= max_blocks or pos + 3 > end:
                return ZstdBound(exact + frame_exact, None, blocks)
            blocks += 1
            word = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            last, kind, size = word & 1, (word >> 1) & 3, word >> 3
            pos += 3
            if kind == 0:  # raw: its bytes, as they are
                frame_exact += size
                frame_bound += size
                pos += size
            elif kind == 1:  # RLE: one byte, repeated size times
                frame_exact += size
                frame_bound += size
                pos += 1
            elif kind == 2:
                frame_bound += _ZSTD_BLOCK_MAX
                pos += size
            else:  # reserved: the decoder refuses it
                return ZstdBound(exact + frame_exact, None, blocks)
            if pos > end:
                return ZstdBound(exact + frame_exact, None, blocks)
            if last:
                break
        pos += 4 if checksum else 0
        exact += frame_exact
        bound += frame_bound if stated is None else min(frame_bound, stated)
    return ZstdBound(exact, bound, blocks)
