"""Compacted topics' rule that every record has a key, checked with bounded decompression.

Compaction keeps the last value per key, so Kafka refuses keyless records on a compacted
topic, which means decoding (and decompressing) every batch of a produce request. A
decompression bomb turns that into seconds of CPU and gigabytes of memory (issue 10,
item 6), so the check has a budget of decompressed bytes per request
(``KEY_CHECK_MAX_BYTES``), answered MESSAGE_TOO_LARGE past it, and the broker runs it on
a worker thread (``produce`` handler), never on the event loop. Sans-I/O.
"""

from __future__ import annotations

from tierlog.records.errors import DecompressedTooLargeError, InvalidRecordError
from tierlog.records.header import HEADER_SIZE, Attr, iter_batches
from tierlog.records.reader import DecodedRecord, iter_records
from tierlog.records.varint import BytesLike

# Decompressed bytes one produce request may cost the key check: the bound tierlog's
# readers put on one batch (codecs.DEFAULT_MAX_SIZE), for the whole request.
KEY_CHECK_MAX_BYTES = 256 * 1024 * 1024


class KeysChecked(bytes):
    """The bytes of batches whose keys were checked already (off the event loop): the log
    skips its own check for them. A copy is the price of the marker; only compacted
    topics pay it."""


def check_keys(records: BytesLike, budget: int = KEY_CHECK_MAX_BYTES) -> int:
    """Check that every record of every batch in ``records`` has a key.

    Returns:
        The decompressed bytes the check cost (0 for uncompressed batches).

    Raises:
        InvalidRecordError: a record without a key (Kafka's rule, INVALID_RECORD).
        DecompressedTooLargeError: the batches decompress to more than ``budget`` bytes.
        CorruptBatchError: a batch that does not decode.
    """
    view = memoryview(records)
    spent = 0
    for position, header in iter_batches(view):
        batch = view[position : position + header.size]
        compressed = header.attributes & Attr.COMPRESSION_MASK
        try:
            decoded = iter_records(batch, verify_crc=False, max_decompressed_size=budget - spent)
        except DecompressedTooLargeError:
            raise DecompressedTooLargeError(
                f"batches of this produce request decompress to more than {budget} bytes, "
                "the most a compacted topic's key check decompresses per request; send "
                "smaller batches"
            ) from None
        for record in decoded:
            if record.key is None:
                raise InvalidRecordError(
                    "compacted topic cannot accept a message without a key "
                    f"(offset delta {record.offset - header.base_offset} of batch {position})"
                )
            if compressed:
                spent += _record_size(record)
        if compressed:
            spent += HEADER_SIZE
    return spent


def _record_size(record: DecodedRecord) -> int:
    """About the bytes ``record`` took decompressed (fields, key, value and headers)."""
    size = 8 + len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += 2 + len(name) + len(value or b"")
    return size
