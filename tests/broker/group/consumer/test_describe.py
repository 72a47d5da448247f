"""Tests for ConsumerGroupDescribe's data (tierlog.broker.group.consumer.describe)."""

from __future__ import annotations

from tierlog.broker.group.consumer.describe import DescribedPartitions
from tierlog.protocol.errors import ErrorCode

from .helpers import GROUP, Harness


def test_a_group_in_the_middle_of_a_rebalance() -> None:
    harness = Harness({"foo": 4, "bar": 1})
    harness.join("a", ("foo", "bar"), client_id="app", client_host="/10.0.0.1", rack_id="r1")
    harness.join("b", regex="fo+", instance_id="i-b")
    [described] = harness.protocol.describe([GROUP])
    assert described.error_code == ErrorCode.none
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
        "Reconciling",
        2,
        2,
    )
    assert described.assignor_name == "uniform"
    a, b = described.members
    foo, bar = harness.topic_id("foo"), harness.topic_id("bar")
    assert (a.member_id, a.client_id, a.client_host, a.rack_id, a.member_type) == (
        "a",
        "app",
        "/10.0.0.1",
        "r1",
        1,
    )
    assert a.subscribed_topic_names == ("bar", "foo") and a.subscribed_topic_regex is None
    # a still owns all of foo (current) while its target gives some of it to b.
    assert a.assignment == (
        DescribedPartitions(bar, "bar", (0,)),
        DescribedPartitions(foo, "foo", (0, 1, 2, 3)),
    )
    assert len(a.target_assignment[1].partitions) < 4
    assert (b.instance_id, b.subscribed_topic_regex, b.assignment) == ("i-b", "fo+", ())
    assert b.target_assignment != ()


def test_missing_groups_and_deleted_topics() -> None:
    harness = Harness({"foo": 2, "bar": 1})
    harness.join("a", ("foo", "bar"))
    harness.topics = harness.topics.without_topic("bar")
    described, missing = harness.protocol.describe([GROUP, "nope"])
    assert [p.topic_name for p in described.members[0].assignment] == ["foo"]
    assert described.group_state == "Stable"
    assert (missing.group_id, missing.error_code, missing.error_message) == (
        "nope",
        ErrorCode.group_id_not_found,
        "Group nope not found.",
    )


def test_an_empty_group_is_described_empty() -> None:
    harness = Harness()
    harness.join("a")
    harness.heartbeat(member_id="a", member_epoch=-1)
    [described] = harness.protocol.describe([GROUP])
    assert (described.group_state, described.members) == ("Empty", ())
