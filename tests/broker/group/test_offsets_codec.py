"""Tests for tierlog.broker.group.offsets_codec: golden bytes, every version, round trips."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsCodecError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    subscription_topics,
)


def h(text: str) -> bytes:
    """Hex to bytes; whitespace is ignored, and so is anything after ``#`` on a line."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()).replace(" ", ""))


# ----------------------------------------------------------------- golden bytes (by hand)

OFFSET_KEY = h("0001 0001 67 0001 74 00000000")  # v1 | "g" | "t" | partition 0
GROUP_KEY = h("0002 0001 67")  # v2 | "g"
# v3 | offset 5 | leader epoch -1 | metadata "" | commit timestamp 1000
OFFSET_VALUE_V3 = h("0003 0000000000000005 ffffffff 0000 00000000000003e8")
GROUP_VALUE_V3 = h(
    """
    0003                        # version 3
    0008 636f6e73756d6572       # protocol_type "consumer"
    00000001                    # generation 1
    0005 72616e6765             # protocol "range"
    0002 6d31                   # leader "m1"
    00000000000003e8            # current_state_timestamp 1000
    00000001                    # members: 1
    0002 6d31                   #   member_id "m1"
    ffff                        #   group_instance_id null
    0001 63                     #   client_id "c"
    0001 68                     #   client_host "h"
    0000012c                    #   rebalance_timeout 300
    00000064                    #   session_timeout 100
    00000001 01                 #   subscription 01
    00000001 02                 #   assignment 02
    """
)
MEMBER = MemberMetadataValue("m1", None, "c", "h", 300, 100, b"\x01", b"\x02")
GROUP = GroupMetadataValue("consumer", 1, "range", "m1", 1000, (MEMBER,))


def test_offset_commit_key_golden() -> None:
    assert encode_key(OffsetCommitKey("g", "t", 0)) == OFFSET_KEY
    assert decode_key(OFFSET_KEY) == OffsetCommitKey("g", "t", 0)


def test_group_metadata_key_golden() -> None:
    assert encode_key(GroupMetadataKey("g")) == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("g")


def test_offset_commit_value_v3_golden() -> None:
    value = OffsetCommitValue(5, -1, "", 1000)
    assert encode_offset_commit_value(value) == OFFSET_VALUE_V3
    assert decode_offset_commit_value(OFFSET_VALUE_V3) == value


def test_group_metadata_value_v3_golden() -> None:
    assert encode_group_metadata_value(GROUP) == GROUP_VALUE_V3
    assert decode_group_metadata_value(GROUP_VALUE_V3) == GROUP


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 2, None, None, 1000, ())
    expected = h("0003 0008 636f6e73756d6572 00000002 ffff ffff 00000000000003e8 00000000")
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


# ----------------------------------------------------------------- older and newer versions


def test_offset_commit_key_version_0_is_read() -> None:
    assert decode_key(h("0000 0001 67 0001 74 00000007")) == OffsetCommitKey("g", "t", 7)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # v0 and v2: offset | metadata | commit timestamp
        (
            h("0000 0000000000000009 0002 6d64 00000000000003e8"),
            OffsetCommitValue(9, -1, "md", 1000),
        ),
        (
            h("0002 0000000000000009 0002 6d64 00000000000003e8"),
            OffsetCommitValue(9, -1, "md", 1000),
        ),
        # v1: ... | expire timestamp
        (
            h("0001 0000000000000009 0000 00000000000003e8 00000000000007d0"),
            OffsetCommitValue(9, -1, "", 1000, 2000),
        ),
        # v4 (flexible): compact metadata "md", empty tagged fields
        (
            h("0004 0000000000000005 00000007 03 6d64 00000000000003e8 00"),
            OffsetCommitValue(5, 7, "md", 1000),
        ),
        # v4 with an unknown tagged field (tag 0, 16 bytes: a topic id) is skipped
        (
            h("0004 0000000000000005 00000007 01 00000000000003e8 01 00 10") + bytes(16),
            OffsetCommitValue(5, 7, "", 1000),
        ),
    ],
)
def test_offset_commit_value_versions(raw: bytes, expected: OffsetCommitValue) -> None:
    assert decode_offset_commit_value(raw) == expected


def test_expire_timestamp_writes_version_1() -> None:
    raw = encode_offset_commit_value(OffsetCommitValue(9, 3, "", 1000, 2000))
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_commit_value(raw) == OffsetCommitValue(9, -1, "", 1000, 2000)


def test_group_metadata_value_v0_defaults() -> None:
    raw = h(
        "0000 0008 636f6e73756d6572 00000003 0005 72616e6765 0002 6d31 00000001"
        " 0002 6d31 0001 63 0001 68 00000064 00000000 00000000"
    )
    value = decode_group_metadata_value(raw)
    assert value.current_state_timestamp == -1
    assert value.members == (MemberMetadataValue("m1", None, "c", "h", 100, 100, b"", b""),)


def test_group_metadata_value_v4_flexible() -> None:
    raw = encode_group_metadata_value(GROUP, version=4)
    expected = h(
        "0004 09 636f6e73756d6572 00000001 06 72616e6765 03 6d31 00000000000003e8 02"
        " 03 6d31 00 02 63 02 68 0000012c 00000064 02 01 02 02 00 00"
    )
    assert raw == expected
    assert decode_group_metadata_value(raw) == GROUP


# ----------------------------------------------------------------- round trips and errors

names = st.text(max_size=12)
offset_values = st.builds(
    OffsetCommitValue,
    offset=st.integers(-1, 2**63 - 1),
    leader_epoch=st.integers(-1, 2**31 - 1),
    metadata=names,
    commit_timestamp=st.integers(-1, 2**62),
)
members = st.builds(
    MemberMetadataValue,
    member_id=names,
    group_instance_id=st.none() | names,
    client_id=names,
    client_host=names,
    rebalance_timeout=st.integers(0, 2**31 - 1),
    session_timeout=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=20),
    assignment=st.binary(max_size=20),
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=names,
    generation=st.integers(0, 2**31 - 1),
    protocol=st.none() | names,
    leader=st.none() | names,
    current_state_timestamp=st.integers(-1, 2**62),
    members=st.lists(members, max_size=4).map(tuple),
)


@given(offset_values, st.sampled_from([3, 4]))
def test_offset_value_round_trip(value: OffsetCommitValue, version: int) -> None:
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


@given(group_values, st.sampled_from([3, 4]))
def test_group_value_round_trip(value: GroupMetadataValue, version: int) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@given(st.text(max_size=20), st.text(max_size=20), st.integers(0, 2**31 - 1))
def test_key_round_trip(group: str, topic: str, partition: int) -> None:
    assert decode_key(encode_key(OffsetCommitKey(group, topic, partition))) == OffsetCommitKey(
        group, topic, partition
    )
    assert decode_key(encode_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@given(st.binary(max_size=64))
def test_decoders_raise_only_codec_errors(data: bytes) -> None:
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        with contextlib.suppress(OffsetsCodecError):
            decode(data)


def test_foreign_key_versions_are_not_ours() -> None:
    # KIP-848 consumer group records (key versions 3+) belong to the new coordinator.
    assert decode_key(h("0003 0001 67")) is None


@pytest.mark.parametrize(
    "raw",
    [h("0001 0001 67"), OFFSET_KEY + b"\x00", h("ffff 0001 67"), h("0002 0005 67")],
)
def test_malformed_keys_raise(raw: bytes) -> None:
    with pytest.raises(OffsetsCodecError):
        decode_key(raw)


def test_unknown_value_version_raises() -> None:
    with pytest.raises(OffsetsCodecError):
        decode_offset_commit_value(h("0005") + OFFSET_VALUE_V3[2:])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's schema loading
def test_subscription_topics_reads_kafka_python_subscriptions() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    for version in (0, 1, 3):
        sub = ConsumerProtocolSubscription(
            version=version,
            topics=["t1", "t2"],
            user_data=b"x",
            owned_partitions=[],
            generation_id=5,
            rack_id="r",
        )
        assert subscription_topics(sub.encode(version=version)) == {"t1", "t2"}
    assert subscription_topics(b"\x00") is None
