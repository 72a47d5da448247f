"""Re-encode a v2 batch's records block with a topic's codec (Kafka's ``compression.type``
other than ``producer``; KIP-390 for the levels), as Kafka's ``LogValidator`` does on the
leader's append.

A records block is the same bytes compressed or not: the records (their timestamp and
offset deltas against the batch's base) are concatenated and, when the batch is
compressed, wrapped as one block of its codec. So re-encoding is decompress, walk the
records (their count must be the header's; on a compacted topic each needs a key), and
compress again. The header keeps everything (base timestamp, max timestamp, producer id,
epoch and base sequence, the transactional flag, lastOffsetDelta, recordCount) except the
codec bits, batchLength and the CRC, which is computed again. The broker assigns the base
offset and partition leader epoch on append, as for any batch; both lie outside the CRC.

Which batches are re-encoded (``needs_recompression``): those whose codec differs from the
target, except a control batch written uncompressed, which stays so (Kafka: "do not
compress control records unless they are written compressed").

Sans-I/O: bytes in, bytes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierlog.records.codecs import compress, iter_decompressed
from tierlog.records.errors import InvalidRecordError
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Attr,
    BatchHeader,
    Compression,
    compute_crc,
)
from tierlog.records.keys import RecordScan
from tierlog.records.varint import BytesLike

_BATCH_LENGTH_OFFSET = 8


@dataclass(frozen=True, slots=True)
class TargetCompression:
    """The codec a topic stores its batches in, and its level (None: the codec's
    default; Kafka's ``compression.<codec>.level``)."""

    codec: Compression
    level: int | None = None


def needs_recompression(attributes: int, target: TargetCompression | None) -> bool:
    """Whether a batch with ``attributes`` is re-encoded for ``target`` (None: the
    topic keeps the producer's codec)."""
    if target is None:
        return False
    codec = attributes & Attr.COMPRESSION_MASK
    if codec == target.codec:
        return False
    # Kafka's LogValidator: a control batch written uncompressed stays uncompressed.
    return not (codec == Compression.NONE and attributes & Attr.CONTROL)


@dataclass(frozen=True, slots=True)
class Recompressed:
    """One re-encoded batch and what decoding it cost (decompressed bytes)."""

    batch: bytes
    decoded_bytes: int


def recompress_batch(
    batch: BytesLike,
    header: BatchHeader,
    target: TargetCompression,
    *,
    max_decompressed_bytes: int,
    keys_required: bool = False,
) -> Recompressed:
    """``batch`` (one whole v2 batch, its CRC checked) with its records in ``target``.

    Args:
        max_decompressed_bytes: the most its block may decompress to.
        keys_required: refuse a record without a key (compacted topics).

    Raises:
        DecompressedTooLargeError: the block decompresses past ``max_decompressed_bytes``.
        CorruptBatchError: the block or a record does not decode.
        InvalidRecordError: a record count that is not the header's, or a keyless record
            on a compacted topic.
        UnsupportedCompressionError: the target codec's library is not installed.
    """
    view = memoryview(batch)
    codec = header.attributes & Attr.COMPRESSION_MASK
    block = view[HEADER_SIZE : header.size]
    scan = RecordScan(keys_required=keys_required)
    pieces: list[bytes | memoryview] = []
    for piece in iter_decompressed(codec, block, max_decompressed_bytes):
        scan.feed(piece)
        pieces.append(piece)
    walked = scan.finish()
    if walked != header.record_count:
        raise InvalidRecordError(f"batch declares {header.record_count} records but holds {walked}")
    plain = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    body = compress(target.codec, plain, target.level)
    out = bytearray(HEADER_SIZE + len(body))
    out[:HEADER_SIZE] = view[:HEADER_SIZE]
    out[HEADER_SIZE:] = body
    attributes = (header.attributes & ~Attr.COMPRESSION_MASK) | int(target.codec)
    out[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big", signed=True)
    batch_length = len(out) - LOG_OVERHEAD
    out[_BATCH_LENGTH_OFFSET : _BATCH_LENGTH_OFFSET + 4] = batch_length.to_bytes(4, "big")
    out[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(out).to_bytes(4, "big")
    decoded = sum(len(p) for p in pieces) if codec else 0
    return Recompressed(bytes(out), decoded)
