"""Tests for ConsumerGroupHeartbeat handling (tierlog.broker.group.consumer.heartbeat, through
ConsumerGroupProtocol): request validation, joining, epochs and fencing, leaving, the
response's contents, assignor choice, and group size."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer import ConsumerGroupConfig, GroupState, MemberState
from tierlog.broker.group.consumer.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRequestError,
    UnknownMemberIdError,
    UnsupportedAssignorError,
)
from tierlog.broker.group.consumer.records import (
    CurrentAssignmentKey,
    GroupEpochKey,
    MemberSubscriptionKey,
    TargetAssignmentEpochKey,
    TargetAssignmentMemberKey,
)
from tierlog.broker.group.consumer.timers import TimerKey, TimerKind
from tierlog.protocol.errors import ErrorCode
from tierlog.util.configdef import ConfigError

from .helpers import GROUP, REBALANCE_TIMEOUT_MS, Harness, owned_of

# ----------------------------------------------------------------- validation

VALID_JOIN = dict(
    member_id="m",
    member_epoch=0,
    rebalance_timeout_ms=1000,
    subscribed_topic_names=("foo",),
    topic_partitions=(),
)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"member_id": ""}, "MemberId can't be empty."),
        ({"group_id": ""}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": ""}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"topic_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
        ({"subscribed_topic_names": None}, "Either SubscribedTopicNames or SubscribedTopicRegex"),
        ({"member_epoch": -2}, "InstanceId can't be null."),
        ({"member_epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests_are_answered_invalid_request(changes: dict, message: str) -> None:
    harness = Harness()
    request = {**VALID_JOIN, **changes}
    with pytest.raises(InvalidRequestError) as raised:
        harness.heartbeat(**request)
    assert raised.value.code == ErrorCode.invalid_request
    assert message in str(raised.value)
    assert harness.log == []  # nothing written


def test_joining_with_owned_partitions_is_invalid() -> None:
    harness = Harness()
    tid = harness.topic_id("foo")
    with pytest.raises(InvalidRequestError, match="TopicPartitions must be empty"):
        harness.heartbeat(**{**VALID_JOIN, "topic_partitions": ((tid, (0,)),)})


def test_version_0_may_join_without_a_member_id_and_gets_one() -> None:
    harness = Harness()
    outcome = harness.heartbeat(**{**VALID_JOIN, "member_id": "", "api_version": 0})
    assert outcome.response is not None
    assert outcome.response.member_id == "generated-0"
    assert "generated-0" in harness.group.members
    # ...but a heartbeat with an epoch needs one in every version.
    with pytest.raises(InvalidRequestError, match="MemberId"):
        harness.heartbeat(member_id="", member_epoch=1, api_version=0)


def test_an_unknown_server_assignor_is_unsupported_assignor() -> None:
    harness = Harness()
    with pytest.raises(UnsupportedAssignorError) as raised:
        harness.heartbeat(**{**VALID_JOIN, "server_assignor": "sticky"})
    assert raised.value.code == ErrorCode.unsupported_assignor
    assert str(raised.value) == (
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )


# ----------------------------------------------------------------- joining


def test_first_member_gets_everything_and_the_group_is_stable() -> None:
    harness = Harness({"foo": 6, "bar": 3})
    outcome = harness.join("a", ("foo", "bar"))
    response = outcome.response
    assert response is not None
    assert (response.member_id, response.member_epoch) == ("a", 1)
    assert response.heartbeat_interval_ms == 5_000
    assert response.assignment == {
        harness.topic_id("foo"): frozenset(range(6)),
        harness.topic_id("bar"): frozenset(range(3)),
    }
    group = harness.group
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, GroupState.STABLE)
    # The records a new group starts with, in Kafka's order.
    kinds = [type(r.key).__name__ for r in outcome.records]
    assert kinds == [
        "MemberSubscriptionKey",
        "SubscriptionMetadataKey",
        "GroupEpochKey",
        "TargetAssignmentMemberKey",
        "TargetAssignmentEpochKey",
        "CurrentAssignmentKey",
    ]
    session = TimerKey(TimerKind.SESSION, GROUP, "a")
    assert harness.deadlines.deadline(session) == harness.clock.milliseconds() + 45_000


def test_second_member_triggers_revocation_then_handover() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    joined = harness.join("b").response
    assert joined is not None
    # b is at the new epoch but gets nothing yet: a still owns all four partitions.
    assert joined.member_epoch == 2 and joined.assignment == {}
    assert harness.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a is told to give two up, and stays at epoch 1 until it does.
    told = harness.beat("a").response
    assert told is not None
    a = harness.group.members["a"]
    assert a.state is MemberState.UNREVOKED_PARTITIONS and told.member_epoch == 1
    assert told.assignment is not None and len(told.assignment[harness.topic_id("foo")]) == 2
    rebalance = TimerKey(TimerKind.REBALANCE, GROUP, "a")
    assert harness.deadlines.deadline(rebalance) is not None
    # a acknowledges (reports only what it kept): epoch 2, and its rebalance timer goes.
    kept = owned_of(told.assignment)
    done = harness.heartbeat(member_id="a", member_epoch=1, topic_partitions=kept)
    assert done.response is not None and done.response.member_epoch == 2
    assert rebalance not in harness.deadlines
    # b's next heartbeat gets the released partitions.
    got = harness.beat("b").response
    assert got is not None and got.assignment is not None
    assert len(got.assignment[harness.topic_id("foo")]) == 2
    assert harness.group.state is GroupState.STABLE


def test_a_heartbeat_with_nothing_new_writes_nothing() -> None:
    harness = Harness()
    harness.join("a")
    outcome = harness.beat("a")
    assert outcome.records == ()
    assert outcome.response is not None and outcome.response.assignment is None


def test_a_full_request_always_gets_the_assignment() -> None:
    harness = Harness()
    harness.join("a")
    outcome = harness.beat(
        "a", rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, subscribed_topic_names=("foo",)
    )
    assert outcome.records == ()
    assert outcome.response is not None
    assert outcome.response.assignment == {harness.topic_id("foo"): frozenset(range(6))}


def test_subscription_change_bumps_the_group_epoch() -> None:
    harness = Harness({"foo": 2, "bar": 2})
    harness.join("a", ("foo",))
    outcome = harness.beat("a", subscribed_topic_names=("foo", "bar"))
    assert harness.group.group_epoch == 2
    assert outcome.response is not None and outcome.response.member_epoch == 2
    assert harness.group.members["a"].assigned == {
        harness.topic_id("foo"): frozenset({0, 1}),
        harness.topic_id("bar"): frozenset({0, 1}),
    }


def test_new_partitions_of_a_subscribed_topic_bump_the_epoch() -> None:
    harness = Harness({"foo": 2})
    harness.join("a")
    harness.topics = harness.topics.with_topic("foo", 4)
    outcome = harness.beat("a")
    assert harness.group.group_epoch == 2
    assert outcome.response is not None
    assert outcome.response.assignment == {harness.topic_id("foo"): frozenset(range(4))}


def test_a_deleted_topic_is_revoked() -> None:
    harness = Harness({"foo": 2, "bar": 1})
    harness.join("a", ("foo", "bar"))
    bar = harness.topic_id("bar")
    harness.topics = harness.topics.without_topic("bar")
    outcome = harness.beat("a")
    assert outcome.response is not None
    assert bar not in (outcome.response.assignment or {})
    assert harness.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS


def test_members_agreeing_on_an_assignor_get_it() -> None:
    harness = Harness({"foo": 4, "bar": 4})
    harness.join("a", ("foo", "bar"), server_assignor="range")
    harness.join("b", ("foo", "bar"), server_assignor="range")
    harness.settle(["a", "b"])
    # range co-partitions: each member has the same partitions of both topics.
    for member in harness.group.members.values():
        assert member.assigned[harness.topic_id("foo")] == member.assigned[harness.topic_id("bar")]
    assert harness.protocol.describe([GROUP])[0].assignor_name == "range"


def test_a_full_group_refuses_new_members_but_not_its_own() -> None:
    harness = Harness(config=ConsumerGroupConfig(max_size=1))
    harness.join("a")
    with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 1 members"):
        harness.join("b")
    assert harness.beat("a").response is not None


def test_per_group_overrides_set_the_session_timeout_and_heartbeat_interval() -> None:
    harness = Harness(
        overrides={"consumer.session.timeout.ms": 50_000, "consumer.heartbeat.interval.ms": 6_000}
    )
    response = harness.join("a").response
    assert response is not None and response.heartbeat_interval_ms == 6_000
    assert harness.deadlines.deadline(TimerKey(TimerKind.SESSION, GROUP, "a")) == (
        harness.clock.milliseconds() + 50_000
    )


def test_an_override_out_of_bounds_is_a_config_error_naming_it() -> None:
    harness = Harness(overrides={"consumer.session.timeout.ms": 1_000})
    with pytest.raises(ConfigError, match=r"consumer\.session\.timeout\.ms"):
        harness.join("a")


# ----------------------------------------------------------------- epochs


def test_an_epoch_ahead_of_the_coordinator_is_fenced() -> None:
    harness = Harness()
    harness.join("a")
    with pytest.raises(FencedMemberEpochError, match=r"greater member epoch \(5\)") as raised:
        harness.heartbeat(member_id="a", member_epoch=5)
    assert raised.value.code == ErrorCode.fenced_member_epoch


def test_the_previous_epoch_is_accepted_only_with_a_subset_of_the_partitions() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    harness.join("b")
    harness.settle(["a", "b"])
    a = harness.group.members["a"]
    assert a.previous_member_epoch < a.member_epoch
    # The response with the new epoch was lost: the member retries with the previous one.
    retried = harness.heartbeat(
        member_id="a", member_epoch=a.previous_member_epoch, topic_partitions=owned_of(a.assigned)
    )
    assert retried.response is not None and retried.response.member_epoch == a.member_epoch
    with pytest.raises(FencedMemberEpochError, match="smaller member epoch"):
        harness.heartbeat(member_id="a", member_epoch=a.previous_member_epoch)  # owned unknown
    # Older than the previous epoch: fenced even with a subset.
    harness.heartbeat(member_id="b", member_epoch=-1)
    harness.settle(["a"])
    a = harness.group.members["a"]
    older = a.previous_member_epoch - 1
    assert 0 < older < a.member_epoch
    with pytest.raises(FencedMemberEpochError, match="smaller member epoch"):
        harness.heartbeat(member_id="a", member_epoch=older, topic_partitions=())


def test_unknown_members_and_groups() -> None:
    harness = Harness()
    with pytest.raises(GroupIdNotFoundError, match=f"Consumer group {GROUP} not found.") as raised:
        harness.heartbeat(member_id="a", member_epoch=3)
    assert raised.value.code == ErrorCode.group_id_not_found
    harness.join("a")
    with pytest.raises(UnknownMemberIdError, match="Member x is not a member of group g") as e:
        harness.heartbeat(member_id="x", member_epoch=1)
    assert e.value.code == ErrorCode.unknown_member_id


# ----------------------------------------------------------------- leaving


def test_leaving_removes_the_member_and_bumps_the_epoch() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    harness.join("b")
    harness.settle(["a", "b"])
    epoch = harness.group.group_epoch
    outcome = harness.heartbeat(member_id="b", member_epoch=-1)
    assert outcome.response is not None
    assert (outcome.response.member_id, outcome.response.member_epoch) == ("b", -1)
    assert "b" not in harness.group.members
    assert harness.group.group_epoch == epoch + 1
    assert TimerKey(TimerKind.SESSION, GROUP, "b") not in harness.deadlines
    kinds = [type(r.key) for r in outcome.records]
    assert kinds[:3] == [CurrentAssignmentKey, TargetAssignmentMemberKey, MemberSubscriptionKey]
    assert kinds[-1] is GroupEpochKey
    # a picks up b's partitions.
    harness.settle(["a"])
    assert harness.group.members["a"].assigned == {harness.topic_id("foo"): frozenset(range(4))}


def test_leaving_an_unknown_group_or_as_an_unknown_member() -> None:
    harness = Harness()
    with pytest.raises(GroupIdNotFoundError):
        harness.heartbeat(member_id="a", member_epoch=-1)
    harness.join("a")
    with pytest.raises(UnknownMemberIdError):
        harness.heartbeat(member_id="z", member_epoch=-1)


def test_the_last_member_leaving_leaves_an_empty_group() -> None:
    harness = Harness()
    harness.join("a")
    harness.heartbeat(member_id="a", member_epoch=-1)
    assert harness.group is not None and harness.group.state is GroupState.EMPTY
    assert harness.group.target == {} and harness.group.subscription_metadata == {}
    assert all(not isinstance(r.key, TargetAssignmentEpochKey) or r.value for r in harness.log)
