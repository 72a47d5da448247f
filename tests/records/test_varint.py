"""Tests for tierlog.records.varint: zigzag varint/varlong codes."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.records.errors import CorruptBatchError
from tierlog.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
)

with warnings.catch_warnings():
    # kafka-python's package import trips importlib.resources deprecation warnings.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import util as kafka_util

int32s = st.integers(min_value=INT32_MIN, max_value=INT32_MAX)
int64s = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (-8192, b"\xff\x7f"),
        (8192, b"\x80\x80\x01"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_codes(value: int, code: bytes) -> None:
    assert encode_varint(value) == code
    assert encode_varlong(value) == code
    assert decode_varint(code, 0) == (value, len(code))
    assert decode_varlong(code, 0) == (value, len(code))


def test_int64_extremes_take_ten_bytes() -> None:
    assert encode_varlong(INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(INT64_MIN) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(encode_varlong(INT64_MIN), 0) == (INT64_MIN, 10)


@given(int32s)
def test_varint_round_trip(value: int) -> None:
    code = encode_varint(value)
    assert len(code) == size_of_varint(value) <= 5
    assert decode_varint(b"\xaa" + code + b"\xbb", 1) == (value, 1 + len(code))


@given(int64s)
def test_varlong_round_trip(value: int) -> None:
    code = encode_varlong(value)
    assert len(code) == size_of_varint(value) <= 10
    assert decode_varlong(bytearray(code), 0) == (value, len(code))
    assert decode_varlong(memoryview(code), 0) == (value, len(code))


@given(int64s)
def test_matches_kafka_python_encoding(value: int) -> None:
    out = bytearray()
    kafka_util.encode_varint(value, out.append)
    assert encode_varlong(value) == bytes(out)
    assert kafka_util.decode_varint(encode_varlong(value), 0) == (value, len(out))


def test_decode_sequence_of_codes() -> None:
    buf = b"".join(encode_varlong(v) for v in (5, -300, 1 << 40, 0))
    pos = 0
    seen = []
    for _ in range(4):
        value, pos = decode_varlong(buf, pos)
        seen.append(value)
    assert seen == [5, -300, 1 << 40, 0]
    assert pos == len(buf)


@pytest.mark.parametrize("code", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_raises(code: bytes) -> None:
    with pytest.raises(CorruptBatchError, match="truncated"):
        decode_varint(code, 0)
    with pytest.raises(CorruptBatchError, match="truncated"):
        decode_varlong(code, 0)


def test_position_past_end_raises() -> None:
    with pytest.raises(CorruptBatchError):
        decode_varint(b"\x02", 1)


def test_overlong_varint_raises() -> None:
    # Six bytes: one more than an int32 code may take, although the value is 0.
    with pytest.raises(CorruptBatchError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    with pytest.raises(CorruptBatchError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)


def test_varint_overflowing_int32_raises() -> None:
    # Five bytes, but bits above 32 set: a valid varlong, not a valid varint.
    code = encode_varlong(1 << 33)
    assert len(code) == 5
    with pytest.raises(CorruptBatchError, match="overflows int32"):
        decode_varint(code, 0)
    assert decode_varlong(code, 0) == (1 << 33, 5)


def test_varlong_overflowing_int64_raises() -> None:
    with pytest.raises(CorruptBatchError, match="overflows int64"):
        decode_varlong(b"\xff" * 9 + b"\x7f", 0)


def test_non_canonical_codes_are_accepted() -> None:
    # Kafka's reader accepts padded codes; so do we (0 written in two bytes).
    assert decode_varint(b"\x80\x00", 0) == (0, 2)
    assert decode_varint(b"\x81\x80\x00", 0) == (-1, 3)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_encode_varint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(value)
    assert decode_varlong(encode_varlong(value), 0)[0] == value


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_encode_varlong_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(value)
