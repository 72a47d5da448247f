"""Walk the records of a records block streamed in pieces: count them and, for compacted
topics, check that each has a key.

Compaction keeps the last value per key, so Kafka refuses keyless records on a compacted
topic (INVALID_RECORD). Checking means reading every record's first fields, which for a
compressed batch means decompressing it. ``RecordScan`` reads only what it needs of each
record (its length, then, for the key check, the three fields before the key's length: at
most 26 bytes) and steps over the rest, piece by piece, so a check holds one piece of the
decompressed block at a time (``codecs.iter_decompressed``), never the whole block: a
decompression bomb costs time, which the caller bounds, but no memory.

Record layout (Kafka's DefaultRecord, zigzag varints)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1: no key) | key | valueLength varint | value | headers ...

Sans-I/O: pieces in, a count out.
"""

from __future__ import annotations

from tierlog.records.errors import CorruptBatchError, InvalidRecordError
from tierlog.records.varint import MAX_VARINT_BYTES, decode_varint, decode_varlong

# The smallest record body (after its length): attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headers count, one byte each.
MIN_RECORD_BODY = 6
# Bytes of a body up to and with keyLength: attributes 1, varlong 10, two varints 5 each.
_KEY_FIELDS_MAX = 1 + 10 + 5 + 5


class RecordScan:
    """Feed a records block's pieces in order (``feed``), then ``finish``.

    Args:
        keys_required: refuse a record without a key (compacted topics).
    """

    def __init__(self, *, keys_required: bool) -> None:
        self.keys_required = keys_required
        self.count = 0
        self._skip = 0  # bytes of the current record still to pass over
        self._carry = b""  # the start of a record that the last piece cut

    def feed(self, piece: bytes | memoryview) -> None:
        """Walk the records in ``piece`` (continuing the one the last piece cut).

        Raises:
            InvalidRecordError: a record without a key, ``keys_required``.
            CorruptBatchError: a record length or field that cannot be read.
        """
        data = self._carry + bytes(piece) if self._carry else piece
        self._carry = b""
        n = len(data)
        pos = 0
        if self._skip:
            if self._skip >= n:
                self._skip -= n
                return
            pos, self._skip = self._skip, 0
        while pos < n:
            try:
                length, body = decode_varint(data, pos)
            except CorruptBatchError:
                if n - pos < MAX_VARINT_BYTES:  # cut by the piece's end: wait for more
                    self._carry = bytes(data[pos:])
                    return
                raise
            if length < MIN_RECORD_BODY:
                raise CorruptBatchError(f"record {self.count} has length {length}")
            end = body + length
            if self.keys_required:
                if n - body < min(length, _KEY_FIELDS_MAX) and end > n:
                    self._carry = bytes(data[pos:])
                    return
                self._check_key(data, body, end)
            self.count += 1
            if end > n:
                self._skip = end - n
                return
            pos = end

    def _check_key(self, data: bytes | memoryview, body: int, end: int) -> None:
        _, p = decode_varlong(data, body + 1)  # attributes, then timestampDelta
        _, p = decode_varint(data, p)  # offsetDelta
        key_length, p = decode_varint(data, p)
        if p > end:
            raise CorruptBatchError(f"record {self.count} is shorter than its fields")
        if key_length < 0:
            raise InvalidRecordError(
                f"compacted topic cannot accept a message without a key (record {self.count} "
                "of its batch)"
            )

    def finish(self) -> int:
        """The records walked.

        Raises:
            CorruptBatchError: the block ended inside a record.
        """
        if self._skip or self._carry:
            raise CorruptBatchError("the records block ends inside a record")
        return self.count
