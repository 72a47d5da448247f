"""Zigzag variable-length integers, as Kafka's v2 records use them for every record field.

Byte format (the protobuf encoding Kafka borrowed): a signed value ``v`` is first zigzag
mapped to an unsigned one, ``(v << 1) ^ (v >> 63)``, so small magnitudes of either sign
get small codes (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...); the unsigned value is then written
7 bits at a time, least significant group first, with the high bit of each byte set
when another byte follows. A *varint* carries an int32 (at most 5 bytes), a *varlong*
an int64 (at most 10 bytes); Kafka uses varlong only for a record's timestampDelta.

Decoding is the inner loop of record decoding, so single-byte values take a table
lookup; ``tierlog.records.reader`` additionally inlines that fast path.
"""

from __future__ import annotations

from tierlog.records.errors import CorruptBatchError

BytesLike = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

# ZIGZAG_1[b] decodes the one-byte code b (< 0x80); ZIGZAG_2[u] decodes a raw 14-bit
# value, which covers every two-byte code. Lists index faster than the arithmetic.
ZIGZAG_1: list[int] = [(u >> 1) ^ -(u & 1) for u in range(1 << 7)]
ZIGZAG_2: list[int] = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]

# Pre-encoded codes for the values records use most (small lengths and deltas).
_SMALL_MIN = -(1 << 13)
_SMALL_MAX = (1 << 13) - 1


def _encode_unchecked(value: int) -> bytes:
    zz = (value << 1) ^ (value >> 63)
    if zz < 0x80:
        return bytes((zz,))
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


_SMALL_CODES: list[bytes] = [_encode_unchecked(v) for v in range(_SMALL_MIN, _SMALL_MAX + 1)]


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zigzag varint (1-5 bytes).

    Raises:
        ValueError: ``value`` does not fit in an int32 (a caller bug, not corrupt data).
    """
    if _SMALL_MIN <= value <= _SMALL_MAX:
        return _SMALL_CODES[value - _SMALL_MIN]
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} outside int32 range")
    return _encode_unchecked(value)


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zigzag varlong (1-10 bytes).

    Raises:
        ValueError: ``value`` does not fit in an int64.
    """
    if _SMALL_MIN <= value <= _SMALL_MAX:
        return _SMALL_CODES[value - _SMALL_MIN]
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} outside int64 range")
    return _encode_unchecked(value)


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varlong(value)`` takes (the same as a varint for int32 values)."""
    zz = (value << 1) ^ (value >> 63)
    size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


def _decode_slow(buf: BytesLike, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode a code of any length up to ``max_bytes``; the caller range-checks."""
    start = pos
    raw = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if pos - start >= max_bytes:
                raise CorruptBatchError(f"varint at byte {start} is longer than {max_bytes} bytes")
    except IndexError:
        raise CorruptBatchError(f"varint at byte {start} is truncated") from None
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Decode the zigzag varint (int32) at ``buf[pos]``.

    Returns:
        ``(value, new_pos)`` where ``new_pos`` is the index just past the code.

    Raises:
        CorruptBatchError: the code runs past the buffer, is longer than 5 bytes or
            decodes outside int32.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return ZIGZAG_1[b], pos + 1
        b2 = buf[pos + 1]
        if b2 < 0x80:
            return ZIGZAG_2[(b & 0x7F) | (b2 << 7)], pos + 2
    except IndexError:
        raise CorruptBatchError(f"varint at byte {pos} is truncated") from None
    value, new_pos = _decode_slow(buf, pos, MAX_VARINT_BYTES)
    if not INT32_MIN <= value <= INT32_MAX:
        raise CorruptBatchError(f"varint at byte {pos} overflows int32")
    return value, new_pos


def decode_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Decode the zigzag varlong (int64) at ``buf[pos]``.

    Returns:
        ``(value, new_pos)``.

    Raises:
        CorruptBatchError: the code runs past the buffer, is longer than 10 bytes or
            decodes outside int64.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return ZIGZAG_1[b], pos + 1
        b2 = buf[pos + 1]
        if b2 < 0x80:
            return ZIGZAG_2[(b & 0x7F) | (b2 << 7)], pos + 2
    except IndexError:
        raise CorruptBatchError(f"varlong at byte {pos} is truncated") from None
    value, new_pos = _decode_slow(buf, pos, MAX_VARLONG_BYTES)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CorruptBatchError(f"varlong at byte {pos} overflows int64")
    return value, new_pos
