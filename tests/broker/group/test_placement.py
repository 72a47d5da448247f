"""Tests for tierlog.broker.group.placement: Java String.hashCode and Kafka's partitionFor."""

from __future__ import annotations

import pytest

from tierlog.broker.group.placement import java_string_hashcode, kafka_abs, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),  # 3105
        ("hello", 99162322),  # well-known Java value
        ("Hello World", -862545276),  # overflows int32: negative in Java
        ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
        # U+1F600 is the surrogate pair D83D DE00 in UTF-16: 0xD83D * 31 + 0xDE00.
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        ("é", 0xE9),  # one UTF-16 unit, not two UTF-8 bytes
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_hashcode_by_hand_with_int32_wraparound() -> None:
    # "Hello World" step by step: h = 31*h + c, kept to 32 bits, read as signed.
    h = 0
    for ch in "Hello World":
        h = (31 * h + ord(ch)) % 2**32
    assert h - 2**32 == java_string_hashcode("Hello World")


@pytest.mark.parametrize("text", ["console-consumer-1", "my-group", "spark-kafka-source-x"])
def test_hashcode_matches_polynomial_definition(text: str) -> None:
    # Java documents s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1], in int arithmetic.
    n = len(text)
    total = sum(ord(c) * 31 ** (n - 1 - i) for i, c in enumerate(text)) % 2**32
    signed = total - 2**32 if total >= 2**31 else total
    assert java_string_hashcode(text) == signed


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5


@pytest.mark.parametrize(
    ("group_id", "partitions", "expected"),
    [
        ("hello", 50, 99162322 % 50),
        ("Hello World", 50, 862545276 % 50),
        ("polygenelubricants", 50, 0),
        ("", 7, 0),
    ],
)
def test_partition_for(group_id: str, partitions: int, expected: int) -> None:
    assert partition_for(group_id, partitions) == expected


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("g", 0)
