"""Tests for tierlog.broker.group.consumer.embedded: the consumer's embedded protocol
(ConsumerProtocolSubscription/Assignment), golden bytes and round trips of every version."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.broker.group.consumer.embedded import (
    ConsumerAssignment,
    ConsumerSubscription,
    EmbeddedProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

# version 0 | topics ["t"] | user data null
SUBSCRIPTION_V0 = bytes.fromhex("0000 00000001 0001 74 ffffffff".replace(" ", ""))
# version 3 | topics ["t"] | user data b"u" | owned [("t", [1])] | generation 7 | rack "r"
SUBSCRIPTION_V3 = bytes.fromhex(
    "0003 00000001 0001 74 00000001 75 00000001 0001 74 00000001 00000001 00000007 0001 72".replace(
        " ", ""
    )
)
# version 1 | [("t", [0, 2])] | user data null
ASSIGNMENT_V1 = bytes.fromhex(
    "0001 00000001 0001 74 00000002 00000000 00000002 ffffffff".replace(" ", "")
)


def test_golden_subscriptions() -> None:
    assert decode_subscription(SUBSCRIPTION_V0) == ConsumerSubscription(("t",), version=0)
    v3 = ConsumerSubscription(("t",), b"u", (("t", (1,)),), 7, "r", 3)
    assert decode_subscription(SUBSCRIPTION_V3) == v3
    assert encode_subscription(v3) == SUBSCRIPTION_V3


def test_golden_assignment_keeps_the_subscriptions_version() -> None:
    assignment = ConsumerAssignment((("t", (0, 2)),))
    assert encode_assignment(assignment, version=1) == ASSIGNMENT_V1
    assert decode_assignment(ASSIGNMENT_V1) == assignment


def test_a_newer_version_reads_as_the_newest_known() -> None:
    newer = b"\x00\x07" + SUBSCRIPTION_V3[2:] + b"\x00\x00\x00\x00"  # v7 with a new field
    decoded = decode_subscription(newer)
    assert (decoded.version, decoded.rack_id, decoded.generation_id) == (3, "r", 7)


@pytest.mark.parametrize(
    "data", [b"", b"\xff\xff", SUBSCRIPTION_V3[:-1], b"\x00\x00\x7f\xff\xff\xff"]
)
def test_malformed_subscriptions(data: bytes) -> None:
    with pytest.raises(EmbeddedProtocolError):
        decode_subscription(data)


names = st.text(max_size=8)
topic_partitions = st.lists(
    st.tuples(names, st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4).map(tuple)),
    max_size=3,
).map(tuple)


@given(
    st.lists(names, max_size=4).map(tuple),
    st.none() | st.binary(max_size=8),
    topic_partitions,
    st.integers(-(2**31), 2**31 - 1),
    st.none() | names,
    st.integers(0, 3),
)
@settings(deadline=None)  # a loaded machine must not fail a correct codec
def test_subscriptions_round_trip_at_every_version(
    topics: tuple[str, ...],
    user_data: bytes | None,
    owned: tuple[tuple[str, tuple[int, ...]], ...],
    generation: int,
    rack: str | None,
    version: int,
) -> None:
    sub = ConsumerSubscription(
        topics,
        user_data,
        owned if version >= 1 else (),
        generation if version >= 2 else -1,
        rack if version >= 3 else None,
        version,
    )
    assert decode_subscription(encode_subscription(sub)) == sub


@given(topic_partitions, st.none() | st.binary(max_size=8), st.integers(0, 3))
@settings(deadline=None)
def test_assignments_round_trip(
    partitions: tuple[tuple[str, tuple[int, ...]], ...], user_data: bytes | None, version: int
) -> None:
    assignment = ConsumerAssignment(partitions, user_data)
    assert decode_assignment(encode_assignment(assignment, version)) == assignment
