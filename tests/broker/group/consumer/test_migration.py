"""Tests for classic <-> consumer group conversions (tierlog.broker.group.consumer.migration),
driven through the heartbeat as Kafka 4 drives them: upgrades when a consumer-protocol member
joins a classic group, downgrades when the last consumer-protocol member leaves."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer import (
    ClassicGroupView,
    ClassicMemberView,
    ConsumerGroupConfig,
    MigrationPolicy,
)
from tierlog.broker.group.consumer.embedded import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from tierlog.broker.group.consumer.errors import GroupIdNotFoundError
from tierlog.broker.group.consumer.member import ClassicProtocol, MemberState
from tierlog.broker.group.consumer.migration import Conversion, empty_group_conversion
from tierlog.broker.group.consumer.records import GroupEpochKey, Record
from tierlog.broker.group.consumer.timers import TimerKey, TimerKind
from tierlog.broker.group.offsets_codec import GroupMetadataKey, GroupMetadataValue
from tierlog.protocol.errors import ErrorCode

from .helpers import GROUP, Harness


def classic_member(
    member_id: str, partitions: tuple[int, ...], version: int = 1
) -> ClassicMemberView:
    subscription = encode_subscription(ConsumerSubscription(("foo",), version=version))
    return ClassicMemberView(
        member_id=member_id,
        instance_id=None,
        client_id=f"client-{member_id}",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=60_000,
        session_timeout_ms=10_000,
        protocols=(ClassicProtocol("range", subscription),),
        assignment=encode_assignment(ConsumerAssignment((("foo", partitions),)), version),
    )


def classic_group(*members: ClassicMemberView, protocol_type: str = "consumer") -> Record:
    """The GroupMetadata record of a Stable classic group at generation 7."""
    from tierlog.broker.group.offsets_codec import MemberMetadataValue

    value = GroupMetadataValue(
        protocol_type,
        7,
        "range",
        members[0].member_id if members else None,
        1_000,
        tuple(
            MemberMetadataValue(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.protocols[0].metadata,
                m.assignment,
            )
            for m in members
        ),
    )
    return Record(GroupMetadataKey(GROUP), value)


def harness_with_classic(
    *members: ClassicMemberView,
    policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL,
    protocol_type: str = "consumer",
    max_size: int = 2**31 - 1,
) -> Harness:
    harness = Harness(
        {"foo": 4}, config=ConsumerGroupConfig(migration_policy=policy, max_size=max_size)
    )
    harness.store.replay(classic_group(*members, protocol_type=protocol_type))
    return harness


# ----------------------------------------------------------------- upgrade


@pytest.mark.parametrize("policy", list(MigrationPolicy))
def test_an_empty_classic_group_converts_under_every_policy(policy: MigrationPolicy) -> None:
    harness = harness_with_classic(policy=policy)
    outcome = harness.join("a")
    assert outcome.conversion is not None and outcome.conversion.kind is Conversion.EMPTY
    assert outcome.records[0] == Record(GroupMetadataKey(GROUP), None)
    assert harness.store.classic_group(GROUP) is None
    assert harness.group.members["a"].assigned == {harness.topic_id("foo"): frozenset(range(4))}


def test_a_non_empty_classic_group_upgrades_online() -> None:
    harness = harness_with_classic(classic_member("c1", (0, 1)), classic_member("c2", (2, 3)))
    outcome = harness.join("a")
    assert outcome.conversion is not None and outcome.conversion.kind is Conversion.UPGRADE
    assert harness.store.classic_group(GROUP) is None
    group = harness.group
    c1 = group.members["c1"]
    assert c1.uses_classic_protocol and c1.classic_metadata is not None
    assert c1.classic_metadata.session_timeout_ms == 10_000
    assert (c1.member_epoch, c1.state) == (7, MemberState.STABLE)
    assert c1.assigned == {harness.topic_id("foo"): frozenset({0, 1})}
    assert c1.subscribed_topic_names == ("foo",)
    # The joining member moves the epoch past the classic generation; the new target makes
    # room for it, and it waits for partitions the classic members still own.
    assert group.group_epoch == 8 and group.assignment_epoch == 8
    assert group.members["a"].state is MemberState.UNRELEASED_PARTITIONS
    # The classic members' sessions run on their classic session timeouts.
    now = harness.clock.milliseconds()
    for member_id, timeout in (("c1", 10_000), ("c2", 10_000), ("a", 45_000)):
        key = TimerKey(TimerKind.SESSION, GROUP, member_id)
        assert harness.deadlines.deadline(key) == now + timeout
    # A coordinator replaying the log rebuilds the converted group.
    assert harness.failover().consumer_group(GROUP).members == group.members


@pytest.mark.parametrize(
    ("policy", "protocol_type", "max_size", "reason"),
    [
        (MigrationPolicy.DISABLED, "consumer", 10, "online upgrade is disabled"),
        (MigrationPolicy.DOWNGRADE, "consumer", 10, "online upgrade is disabled"),
        (MigrationPolicy.UPGRADE, "connect", 10, "does not use the consumer embedded protocol"),
        (MigrationPolicy.UPGRADE, "consumer", 1, "exceeds the consumer group maximum size"),
    ],
)
def test_an_upgrade_the_rules_forbid_is_group_id_not_found(
    policy: MigrationPolicy, protocol_type: str, max_size: int, reason: str
) -> None:
    harness = harness_with_classic(
        classic_member("c1", (0, 1)),
        classic_member("c2", (2, 3)),
        policy=policy,
        protocol_type=protocol_type,
        max_size=max_size,
    )
    with pytest.raises(GroupIdNotFoundError, match=reason) as raised:
        harness.join("a")
    assert raised.value.code == ErrorCode.group_id_not_found
    assert str(raised.value).startswith(f"Cannot upgrade classic group {GROUP} to consumer group")
    assert harness.log == [] and harness.store.classic_group(GROUP) is not None


def test_a_malformed_embedded_protocol_blocks_the_upgrade() -> None:
    broken = ClassicMemberView("c1", None, "c", "h", 1, 1, (ClassicProtocol("range", b"\x00"),))
    harness = harness_with_classic(broken)
    with pytest.raises(GroupIdNotFoundError, match="malformed"):
        harness.join("a")


def test_a_classic_group_is_not_a_consumer_group_for_other_heartbeats() -> None:
    harness = harness_with_classic(classic_member("c1", (0,)))
    with pytest.raises(GroupIdNotFoundError, match="Group g is not a consumer group"):
        harness.heartbeat(member_id="c1", member_epoch=7)
    described = harness.protocol.describe([GROUP])[0]
    assert described.error_code == ErrorCode.group_id_not_found
    assert described.error_message == "Group g is not a consumer group."


# ----------------------------------------------------------------- downgrade


def upgraded(config: ConsumerGroupConfig | None = None) -> Harness:
    harness = Harness({"foo": 4}, config=config)
    harness.store.replay(classic_group(classic_member("c1", (0, 1)), classic_member("c2", (2, 3))))
    harness.join("a")
    return harness


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    harness = upgraded()
    outcome = harness.heartbeat(member_id="a", member_epoch=-1)
    assert outcome.conversion is not None and outcome.conversion.kind is Conversion.DOWNGRADE
    assert harness.store.consumer_group(GROUP) is None
    classic = harness.store.classic_group(GROUP)
    assert isinstance(classic, ClassicGroupView)
    assert (classic.protocol_type, classic.protocol_name, classic.generation) == (
        "consumer",
        "range",
        8,
    )
    given = {m.member_id: decode_assignment(m.assignment).partitions for m in classic.members}
    # Each classic member gets its target assignment at the last epoch (a's share stays
    # unassigned until the rebalance the classic protocol starts after a downgrade).
    assert given == {"c1": (("foo", (0, 1)),), "c2": (("foo", (2,)),)}
    # The consumer group's records are all deleted before the classic group is written.
    assert isinstance(outcome.records[-1].key, GroupMetadataKey)
    assert outcome.records[-2] == Record(GroupEpochKey(GROUP), None)


@pytest.mark.parametrize("policy", [MigrationPolicy.UPGRADE, MigrationPolicy.DISABLED])
def test_no_downgrade_when_the_policy_forbids_it(policy: MigrationPolicy) -> None:
    harness = upgraded()
    harness.take_over(ConsumerGroupConfig(migration_policy=policy))  # restarted with it
    outcome = harness.heartbeat(member_id="a", member_epoch=-1)
    assert outcome.conversion is None
    assert set(harness.group.members) == {"c1", "c2"}


def test_no_downgrade_past_the_classic_groups_size_limit() -> None:
    harness = upgraded(ConsumerGroupConfig(classic_max_size=1))
    assert harness.heartbeat(member_id="a", member_epoch=-1).conversion is None


def test_no_downgrade_while_consumer_members_remain() -> None:
    harness = upgraded()
    harness.join("b")
    assert harness.heartbeat(member_id="a", member_epoch=-1).conversion is None
    assert set(harness.group.members) == {"c1", "c2", "b"}


def test_an_empty_consumer_group_gives_way_to_a_classic_join() -> None:
    harness = Harness()
    harness.join("a")
    assert empty_group_conversion(harness.group) is None  # members keep it
    harness.heartbeat(member_id="a", member_epoch=-1)
    conversion = empty_group_conversion(harness.group)
    assert conversion is not None and conversion.kind is Conversion.EMPTY
    harness.store.replay_all(conversion.records)
    assert harness.store.consumer_group(GROUP) is None
