"""Tests for tierlog.broker.group.consumer.record_codec: golden bytes written by hand from
Kafka's JSON schemas, round trips of every record type, tombstones, tagged fields, and
malformed input."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.broker.group.consumer.member import ClassicMemberMetadata, ClassicProtocol
from tierlog.broker.group.consumer.record_codec import (
    RecordsCodecError,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from tierlog.broker.group.consumer.records import (
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberSubscriptionKey,
    MemberSubscriptionValue,
    Record,
    RegexKey,
    RegexValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadataEntry,
)
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    decode_group_metadata_value,
)
from tierlog.broker.group.offsets_codec import decode_key as decode_classic_key

T = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T_HEX = "00112233445566778899aabbccddeeff"


def h(text: str) -> bytes:
    """Hex to bytes; whitespace is ignored, and so is anything after ``#`` on a line."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()).replace(" ", ""))


# ----------------------------------------------------------------- golden bytes (by hand)

GOLDEN = [
    (
        Record(GroupEpochKey("g"), GroupEpochValue(5)),
        h("0003 0001 67"),  # type 3 | "g"
        h("0000 00000005 00"),  # version 0 | epoch 5 | no tagged fields
    ),
    (
        Record(GroupEpochKey("g"), GroupEpochValue(5, metadata_hash=1)),
        h("0003 0001 67"),
        h("0000 00000005 01 00 08 0000000000000001"),  # tag 0, 8 bytes: the metadata hash
    ),
    (
        Record(
            SubscriptionMetadataKey("g"),
            SubscriptionMetadataValue((TopicMetadataEntry(T, "foo", 6),)),
        ),
        h("0004 0001 67"),
        h(
            f"""0000
            02 {T_HEX} 04 666f6f 00000006  # one topic: id | "foo" | 6 partitions
            01 00                          # no partition racks | topic's tags
            00                             # value's tags"""
        ),
    ),
    (
        Record(
            MemberSubscriptionKey("g", "m"),
            MemberSubscriptionValue(None, None, "c", "h", ("t",), None, 1000, None),
        ),
        h("0005 0001 67 0001 6d"),  # type 5 | "g" | "m"
        h(
            """0000
            00 00          # instance id null | rack id null
            02 63 02 68    # client id "c" | client host "h"
            02 02 74       # subscribed topic names ["t"]
            00             # regex null
            000003e8       # rebalance timeout 1000
            00             # server assignor null
            00             # no tagged fields"""
        ),
    ),
    (
        Record(
            MemberSubscriptionKey("g", "m"),
            MemberSubscriptionValue(
                "i",
                "r",
                "c",
                "h",
                (),
                "t.*",
                -1,
                "uniform",
                ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x01"),)),
            ),
        ),
        h("0005 0001 67 0001 6d"),
        h(
            """0000
            02 69 02 72 02 63 02 68  # "i" | "r" | "c" | "h"
            01                       # no topic names
            04 742e2a                # regex "t.*"
            ffffffff                 # rebalance timeout -1
            08 756e69666f726d        # "uniform"
            01 00 10                 # one tagged field: tag 0, 16 bytes
              01                     #   present (nullable struct)
              0000afc8               #   session timeout 45000
              02 06 72616e6765 02 01 00  # [("range", b"\\x01")] with its tags
              00                     #   the struct's tags"""
        ),
    ),
    (
        Record(TargetAssignmentEpochKey("g"), TargetAssignmentEpochValue(4)),
        h("0006 0001 67"),
        h("0000 00000004 00"),
    ),
    (
        Record(
            TargetAssignmentMemberKey("g", "m"),
            TargetAssignmentMemberValue({T: frozenset({1, 0})}),
        ),
        h("0007 0001 67 0001 6d"),
        h(f"0000 02 {T_HEX} 03 00000000 00000001 00 00"),
    ),
    (
        Record(
            CurrentAssignmentKey("g", "m"),
            CurrentAssignmentValue(3, 2, 1, {T: frozenset({0, 1})}, {}),
        ),
        h("0008 0001 67 0001 6d"),
        h(
            f"""0000 00000003 00000002 01        # epoch 3 | previous 2 | state 1
            02 {T_HEX} 03 00000000 00000001 00  # assigned: T [0, 1]
            01                                  # nothing pending revocation
            00"""
        ),
    ),
    (
        Record(RegexKey("g", "t.*"), RegexValue(("a", "b"), 7, 1000)),
        h("0010 0001 67 0003 742e2a"),  # type 16 | "g" | "t.*"
        h("0000 03 0261 0262 0000000000000007 00000000000003e8 00"),
    ),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN)
def test_golden_bytes(record: Record, key: bytes, value: bytes) -> None:
    assert encode_record(record) == (key, value)
    assert decode_record(key, value) == record


def test_tombstones_have_no_value() -> None:
    record = Record(CurrentAssignmentKey("g", "m"), None)
    key, value = encode_record(record)
    assert value is None
    assert decode_record(key, None) == record


def test_classic_records_go_through_the_offsets_codec() -> None:
    value = GroupMetadataValue("consumer", 3, "range", None, 10, ())
    key_bytes, value_bytes = encode_record(Record(GroupMetadataKey("g"), value))
    assert decode_classic_key(key_bytes) == GroupMetadataKey("g")
    assert value_bytes is not None and decode_group_metadata_value(value_bytes) == value
    assert encode_record(Record(GroupMetadataKey("g"), None))[1] is None
    # Not a consumer group's record: the consumer codec leaves it to offsets_codec.
    assert decode_record(key_bytes, value_bytes) is None


@pytest.mark.parametrize("record_type", [0, 1, 2, 9, 10, 15, 17, 20])
def test_other_record_types_are_not_ours(record_type: int) -> None:
    assert decode_key(record_type.to_bytes(2, "big") + h("0001 67 0001 6d")) is None


def test_mismatched_classic_and_consumer_parts_are_refused() -> None:
    with pytest.raises(RecordsCodecError):
        encode_record(Record(GroupMetadataKey("g"), GroupEpochValue(1)))  # type: ignore[arg-type]
    with pytest.raises(RecordsCodecError):
        encode_record(
            Record(GroupEpochKey("g"), GroupMetadataValue("consumer", 1, None, None, 1, ()))
        )


def test_unknown_tagged_fields_are_skipped() -> None:
    # A newer Kafka's group epoch value: tag 1 (KIP-1282's creation time) and tag 0 (hash).
    value = h("0000 00000009 02 00 08 0000000000000002 01 08 0000018f00000000")
    assert decode_value(3, value) == GroupEpochValue(9, metadata_hash=2)
    # KIP-1251's per-partition epochs (tag 0 of a TopicPartitions entry) are skipped too.
    current = h(f"0000 00000003 00000002 00 02 {T_HEX} 02 00000004 01 00 05 02 00000003 01 00")
    assert decode_value(8, current) == CurrentAssignmentValue(3, 2, 0, {T: frozenset({4})}, {})


@pytest.mark.parametrize(
    ("kind", "data", "problem"),
    [
        (3, h("0001 00000005 00"), "version"),
        (3, h("0000 000000"), "truncated"),
        (3, h("0000 00000005 00 ff"), "trailing"),
        (5, h("0000 00 00 ff7f"), "varint|truncated"),
        (7, h("0000 7f"), "array length"),
        (5, h("0000 00 00 02 ff 02 68 01 00 00000000 00 00"), "UTF-8"),
        (5, h("0000 00 00 00 02 68 01 00 00000000 00 00"), "null"),
        (1, h("0000"), "not a consumer group"),
    ],
)
def test_malformed_values(kind: int, data: bytes, problem: str) -> None:
    with pytest.raises(RecordsCodecError, match=problem):
        decode_value(kind, data)


def test_malformed_keys() -> None:
    with pytest.raises(RecordsCodecError, match="truncated"):
        decode_key(h("0005 0001 67"))  # a member key without its member
    with pytest.raises(RecordsCodecError, match="trailing"):
        decode_key(h("0003 0001 67 00"))
    with pytest.raises(RecordsCodecError, match="invalid string length"):
        decode_key(h("0003 ffff"))


def test_values_that_do_not_fit_are_refused() -> None:
    with pytest.raises(RecordsCodecError, match="int32"):
        encode_value(GroupEpochValue(2**31))
    with pytest.raises(RecordsCodecError, match="int16 length"):
        encode_key(GroupEpochKey("x" * 40_000))


# ----------------------------------------------------------------- round trips

names = st.text(max_size=12)
maybe = st.none() | names
epochs = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
topic_ids = st.uuids()
assignments = st.dictionaries(
    topic_ids, st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=5), max_size=4
)
classics = st.none() | st.builds(
    ClassicMemberMetadata,
    epochs,
    st.lists(st.builds(ClassicProtocol, names, st.binary(max_size=8)), max_size=3).map(tuple),
)
keys = st.one_of(
    st.builds(GroupEpochKey, names),
    st.builds(SubscriptionMetadataKey, names),
    st.builds(MemberSubscriptionKey, names, names),
    st.builds(TargetAssignmentEpochKey, names),
    st.builds(TargetAssignmentMemberKey, names, names),
    st.builds(CurrentAssignmentKey, names, names),
    st.builds(RegexKey, names, names),
)
VALUES = {
    GroupEpochKey: st.builds(GroupEpochValue, epochs, longs),
    SubscriptionMetadataKey: st.builds(
        SubscriptionMetadataValue,
        st.lists(
            st.builds(
                TopicMetadataEntry,
                topic_ids,
                names,
                epochs,
                st.lists(st.tuples(epochs, st.lists(names, max_size=2).map(tuple)), max_size=2).map(
                    tuple
                ),
            ),
            max_size=3,
        ).map(tuple),
    ),
    MemberSubscriptionKey: st.builds(
        MemberSubscriptionValue,
        maybe,
        maybe,
        names,
        names,
        st.lists(names, max_size=3).map(tuple),
        maybe,
        epochs,
        maybe,
        classics,
    ),
    TargetAssignmentEpochKey: st.builds(TargetAssignmentEpochValue, epochs, longs),
    TargetAssignmentMemberKey: st.builds(TargetAssignmentMemberValue, assignments),
    CurrentAssignmentKey: st.builds(
        CurrentAssignmentValue, epochs, epochs, st.integers(-128, 127), assignments, assignments
    ),
    RegexKey: st.builds(RegexValue, st.lists(names, max_size=3).map(tuple), longs, longs),
}


@st.composite
def records(draw: st.DrawFn) -> Record:
    key = draw(keys)
    value = draw(st.none() | VALUES[type(key)])
    return Record(key, value)


@given(records())
@settings(max_examples=400, deadline=None)
def test_every_record_round_trips(record: Record) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


@given(st.binary(max_size=64), st.integers(0, 20))
@settings(max_examples=500, deadline=None)
def test_arbitrary_bytes_decode_or_raise_the_codec_error(data: bytes, kind: int) -> None:
    for attempt in (lambda: decode_key(data), lambda: decode_value(kind, data)):
        with contextlib.suppress(RecordsCodecError):
            attempt()
