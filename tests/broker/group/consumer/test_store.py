"""Tests for replaying records (tierlog.broker.group.consumer.store and ConsumerGroup.apply):
the rules a replay enforces, and rebuilding after a coordinator failover."""

from __future__ import annotations

import pytest

from tierlog.broker.group.consumer import ConsumerGroupStore, GroupState, ReplayError
from tierlog.broker.group.consumer import record_helpers as rh
from tierlog.broker.group.consumer.member import ConsumerGroupMember, MemberState
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.topics import topic_id_for
from tierlog.broker.group.offsets_codec import GroupMetadataKey, GroupMetadataValue

from .helpers import GROUP, Harness

FOO = topic_id_for("foo")


def member(member_id: str, partitions: set[int], epoch: int = 1) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id, member_epoch=epoch, assigned={FOO: frozenset(partitions)} if partitions else {}
    )


def test_a_partition_given_to_a_second_member_is_refused() -> None:
    store = ConsumerGroupStore()
    store.replay(rh.current_assignment(GROUP, member("a", {0, 1})))
    with pytest.raises(ReplayError, match="still owned by member a at epoch 1"):
        store.replay(rh.current_assignment(GROUP, member("b", {1})))
    # Once a gives it up, b may have it.
    store.replay(rh.current_assignment(GROUP, member("a", {0}, epoch=2)))
    store.replay(rh.current_assignment(GROUP, member("b", {1})))
    group = store.consumer_group(GROUP)
    assert group.partition_owner(FOO, 1) == ("b", 1)
    assert group.partition_owner(FOO, 0) == ("a", 2)


def test_a_member_is_deleted_only_after_its_assignments() -> None:
    store = ConsumerGroupStore()
    m = member("a", {0})
    store.replay(rh.member_subscription(GROUP, m))
    store.replay(rh.current_assignment(GROUP, m))
    store.replay(rh.target_member(GROUP, "a", m.assigned))
    tombstones = rh.member_tombstones(GROUP, "a")
    with pytest.raises(ReplayError, match="before its current assignment"):
        store.replay(tombstones[2])
    store.replay(tombstones[0])
    with pytest.raises(ReplayError, match="before its target assignment"):
        store.replay(tombstones[2])
    store.replay(tombstones[1])
    store.replay(tombstones[2])
    assert store.consumer_group(GROUP).members == {}
    assert store.consumer_group(GROUP).is_owned(FOO, 0) is False


def test_a_group_with_members_cannot_be_deleted() -> None:
    store = ConsumerGroupStore()
    store.replay(rh.member_subscription(GROUP, member("a", set())))
    with pytest.raises(ReplayError, match="while it has members"):
        store.replay(Record(rh.group_epoch(GROUP, 1).key, None))


def test_tombstones_for_what_is_gone_are_ignored() -> None:
    store = ConsumerGroupStore()
    store.replay_all(rh.member_tombstones(GROUP, "ghost"))
    store.replay(Record(rh.group_epoch(GROUP, 1).key, None))
    assert store.consumer_group(GROUP) is None


def test_one_id_one_group_type() -> None:
    store = ConsumerGroupStore()
    store.replay(rh.group_epoch(GROUP, 1))
    classic = GroupMetadataValue("consumer", 1, None, None, 0, ())
    with pytest.raises(ReplayError, match="is a consumer group"):
        store.replay(Record(GroupMetadataKey(GROUP), classic))


def test_a_member_record_after_its_assignment_still_builds_it() -> None:
    # Compaction keeps only each key's last record, so a member's subscription may come
    # after its current assignment in the log.
    store = ConsumerGroupStore()
    store.replay(rh.current_assignment(GROUP, member("a", {0}, epoch=4)))
    store.replay(rh.member_subscription(GROUP, ConsumerGroupMember("a", client_id="late")))
    a = store.consumer_group(GROUP).members["a"]
    assert (a.client_id, a.member_epoch, a.assigned) == ("late", 4, {FOO: frozenset({0})})


def test_a_failover_rebuilds_a_busy_group_exactly() -> None:
    harness = Harness({"foo": 6, "bar": 3})
    harness.join("a", ("foo", "bar"))
    harness.join("b", ("foo",), instance_id="i-b")
    harness.join("c", regex="ba.*")
    harness.beat("a")
    harness.heartbeat(member_id="c", member_epoch=-1)
    rebuilt = harness.failover().consumer_group(GROUP)
    live = harness.group
    assert rebuilt.members == live.members
    assert rebuilt.target == live.target
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (
        live.group_epoch,
        live.assignment_epoch,
    )
    assert rebuilt.static_members == live.static_members == {"i-b": "b"}
    assert rebuilt.subscription_metadata == live.subscription_metadata
    assert rebuilt.state is live.state is GroupState.ASSIGNING  # c left: a new epoch
    # The new coordinator carries on where the old one stopped.
    harness.take_over()
    harness.settle(["a", "b"])
    assert all(m.state is MemberState.STABLE for m in harness.group.members.values())


def test_rebuilding_from_group_records_gives_the_same_group() -> None:
    harness = Harness({"foo": 4})
    harness.join("a")
    harness.join("b")
    harness.settle(["a", "b"])
    store = ConsumerGroupStore()
    store.replay_all(rh.group_records(harness.group))
    assert store.consumer_group(GROUP).members == harness.group.members
    store.replay_all(rh.group_tombstones(store.consumer_group(GROUP)))
    assert store.consumer_group(GROUP) is None
