"""Tests for static membership (``group.instance.id``) in the consumer group protocol: the
instance id is held until its member leaves with epoch -2, a new member with it takes over
the partitions without a rebalance, and an old member with it is fenced."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer import GroupState
from tierlog.broker.group.consumer.errors import (
    FencedInstanceIdError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from tierlog.protocol.errors import ErrorCode

from .helpers import Harness


def static_pair() -> Harness:
    harness = Harness({"foo": 4})
    harness.join("a1", instance_id="alpha")
    harness.join("b1", instance_id="beta")
    harness.settle(["a1", "b1"])
    return harness


def test_an_instance_id_in_use_is_unreleased() -> None:
    harness = static_pair()
    with pytest.raises(UnreleasedInstanceIdError) as raised:
        harness.join("a2", instance_id="alpha")
    assert raised.value.code == ErrorCode.unreleased_instance_id
    assert str(raised.value) == (
        "Static member a2 with instance id alpha cannot join the group because the instance "
        "id is owned by a1 member."
    )


def test_leaving_with_epoch_minus_two_keeps_the_partitions_and_the_epoch() -> None:
    harness = static_pair()
    epoch = harness.group.group_epoch
    held = harness.group.members["a1"].assigned
    outcome = harness.heartbeat(member_id="a1", member_epoch=-2, instance_id="alpha")
    assert outcome.response is not None and outcome.response.member_epoch == -2
    a1 = harness.group.members["a1"]
    assert (a1.member_epoch, a1.assigned) == (-2, held)
    assert harness.group.group_epoch == epoch  # no rebalance for the others


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() -> None:
    harness = static_pair()
    epoch = harness.group.group_epoch
    held = harness.group.members["a1"].assigned
    harness.heartbeat(member_id="a1", member_epoch=-2, instance_id="alpha")
    outcome = harness.join("a2", instance_id="alpha")
    response = outcome.response
    assert response is not None
    assert (response.member_id, response.member_epoch, response.assignment) == ("a2", epoch, held)
    group = harness.group
    assert "a1" not in group.members and group.static_members["alpha"] == "a2"
    assert group.group_epoch == epoch and group.state is GroupState.STABLE
    # The old member's timers are cancelled; the new one's session is armed.
    armed = {(t.key.kind.value, t.key.member_id) for t in harness.deadlines.due(10**15)}
    assert armed == {("session-timeout", "a2"), ("session-timeout", "b1")}


def test_a_restarted_static_member_with_a_new_subscription_rebalances() -> None:
    harness = Harness({"foo": 2, "bar": 2})
    harness.join("a1", ("foo",), instance_id="alpha")
    harness.heartbeat(member_id="a1", member_epoch=-2, instance_id="alpha")
    epoch = harness.group.group_epoch
    harness.join("a2", ("foo", "bar"), instance_id="alpha")
    harness.settle(["a2"])
    assert harness.group.group_epoch == epoch + 1
    assert set(harness.group.members["a2"].assigned) == {
        harness.topic_id("foo"),
        harness.topic_id("bar"),
    }


def test_the_replaced_member_is_fenced_by_instance_id() -> None:
    harness = static_pair()
    harness.heartbeat(member_id="a1", member_epoch=-2, instance_id="alpha")
    harness.join("a2", instance_id="alpha")
    with pytest.raises(FencedInstanceIdError) as raised:
        harness.heartbeat(member_id="a1", member_epoch=2, instance_id="alpha")
    assert raised.value.code == ErrorCode.fenced_instance_id
    assert "was fenced by member a2" in str(raised.value)
    with pytest.raises(FencedInstanceIdError):
        harness.heartbeat(member_id="a1", member_epoch=-1, instance_id="alpha")


def test_an_unknown_instance_id_is_an_unknown_member() -> None:
    harness = static_pair()
    with pytest.raises(UnknownMemberIdError, match="Instance id gamma is unknown"):
        harness.heartbeat(member_id="c", member_epoch=3, instance_id="gamma")
    with pytest.raises(UnknownMemberIdError, match="Instance id gamma is unknown"):
        harness.heartbeat(member_id="c", member_epoch=-2, instance_id="gamma")


def test_a_static_member_leaving_for_good_rebalances() -> None:
    harness = static_pair()
    epoch = harness.group.group_epoch
    harness.heartbeat(member_id="a1", member_epoch=-1, instance_id="alpha")
    assert "a1" not in harness.group.members and "alpha" not in harness.group.static_members
    assert harness.group.group_epoch == epoch + 1


def test_a_static_member_not_back_within_its_session_is_removed() -> None:
    harness = static_pair()
    harness.heartbeat(member_id="a1", member_epoch=-2, instance_id="alpha")
    harness.clock.advance(40_000)
    harness.beat("b1")  # b1 keeps its session alive
    harness.advance(6_000)  # a1's session (armed 46 s ago) has expired
    assert "a1" not in harness.group.members
    assert "b1" in harness.group.members
    harness.settle(["b1"])
    assert harness.group.members["b1"].assigned == {harness.topic_id("foo"): frozenset(range(4))}
