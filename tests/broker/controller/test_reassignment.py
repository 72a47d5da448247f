"""Reassignment rules (tierlog.broker.controller.reassignment): Kafka's ReplicaAssignment
arithmetic, target checks, completion, the leader move and the leader-imbalance measure."""

from __future__ import annotations

import uuid

from tierlog.broker.controller import reassignment as rs
from tierlog.broker.controller.reassignment import PartitionAssignment
from tierlog.broker.coordination.zk_data import (
    NO_LEADER,
    LeaderAndIsr,
    TopicAssignment,
    decode_topic,
    encode_topic,
)


def test_reassign_to_puts_the_target_first_and_names_adding_and_removing() -> None:
    # Kafka's ReplicaAssignment.reassignTo: RS = (TRS ++ ORS).distinct.
    moved = PartitionAssignment((0, 1, 2)).reassign_to([1, 2, 3])
    assert moved == PartitionAssignment((1, 2, 3, 0), adding=(3,), removing=(0,))
    assert moved.is_reassigning
    assert moved.origin == (1, 2, 0)
    assert moved.target == (1, 2, 3)
    assert moved.completed() == PartitionAssignment((1, 2, 3))


def test_a_new_target_is_relative_to_the_original_replicas() -> None:
    moving = PartitionAssignment((0, 1, 2)).reassign_to([1, 2, 3])
    again = moving.reassign_to([1, 2, 4])
    # 3 is neither original nor wanted: it leaves at once.
    assert again == PartitionAssignment((1, 2, 4, 0), adding=(4,), removing=(0,))


def test_cancel_reverts_to_the_original_replica_set() -> None:
    moving = PartitionAssignment((0, 1, 2)).reassign_to([3, 4, 5])
    assert moving.revert() == PartitionAssignment((0, 1, 2))
    assert not moving.revert().is_reassigning


def test_a_reorder_is_not_a_reassignment_in_progress() -> None:
    reordered = PartitionAssignment((0, 1, 2)).reassign_to([2, 1, 0])
    assert reordered == PartitionAssignment((2, 1, 0))
    assert not reordered.is_reassigning


def test_check_target() -> None:
    current = PartitionAssignment((0, 1, 2))
    live = {0, 1, 2, 3}
    assert rs.check_target([1, 2, 3], current, live) is None
    assert rs.check_target([], current, live)[0] == rs.INVALID_REPLICA_ASSIGNMENT  # type: ignore[index]
    assert rs.check_target([1, 1], current, live)[0] == rs.INVALID_REPLICA_ASSIGNMENT  # type: ignore[index]
    assert rs.check_target([1, 9], current, live)[0] == rs.INVALID_REPLICA_ASSIGNMENT  # type: ignore[index]
    refused = rs.check_target([1, 2], current, live, allow_replication_factor_change=False)
    assert refused is not None and refused[0] == rs.INVALID_REPLICATION_FACTOR
    assert rs.check_target([1, 2, 3], current, live, allow_replication_factor_change=False) is None


def test_complete_when_every_target_replica_is_in_sync() -> None:
    moving = PartitionAssignment((0, 1, 2)).reassign_to([1, 2, 3])
    assert not rs.is_complete(moving, [0, 1, 2])
    assert rs.is_complete(moving, [0, 1, 2, 3])
    assert rs.is_complete(moving, [1, 2, 3])


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, controller_epoch=1)


def test_restrict_moves_a_removed_leader_to_the_first_live_in_sync_target() -> None:
    after = rs.restrict_to(state(0, 4, (0, 1, 2, 3)), (3, 1, 2), {0, 1, 2, 3}, 7)
    assert after == LeaderAndIsr(3, 5, (1, 2, 3), 7)


def test_restrict_keeps_a_leader_that_stays_and_shrinks_the_isr() -> None:
    after = rs.restrict_to(state(1, 4, (0, 1, 2, 3)), (1, 2, 3), {0, 1, 2, 3}, 7)
    assert after == LeaderAndIsr(1, 5, (1, 2, 3), 7)


def test_restrict_is_a_no_op_when_nothing_removed_is_in_the_state() -> None:
    current = state(1, 4, (1, 2, 3))
    assert rs.restrict_to(current, (1, 2, 3), {0, 1, 2, 3}, 7) is current


def test_restrict_refuses_when_no_kept_replica_can_lead() -> None:
    # the kept replicas are dead or out of sync: removing the leader would leave none
    assert rs.restrict_to(state(0, 4, (0, 1)), (2, 3), {0, 1, 2, 3}, 7) is None
    assert rs.restrict_to(state(0, 4, (0, 1)), (1,), {0}, 7) is None
    # a dead leader that stays is replaced as well
    assert rs.restrict_to(state(1, 4, (1, 2)), (1, 2), {2}, 7) == LeaderAndIsr(2, 5, (1, 2), 7)
    assert rs.restrict_to(state(NO_LEADER, 4, (1,)), (1,), {1}, 7) == LeaderAndIsr(1, 5, (1,), 7)


def test_with_partition_round_trips_through_the_topic_znode() -> None:
    topic = TopicAssignment({0: [0, 1, 2], 1: [1, 2, 0]}, uuid.uuid4())
    moving = rs.assignment_of(topic, 0).reassign_to([1, 2, 3])
    stored = decode_topic("t", encode_topic(rs.with_partition(topic, 0, moving)))
    assert rs.assignment_of(stored, 0) == moving
    assert rs.assignment_of(stored, 1) == PartitionAssignment((1, 2, 0))
    done = decode_topic("t", encode_topic(rs.with_partition(stored, 0, moving.completed())))
    assert done.partitions == {0: [1, 2, 3], 1: [1, 2, 0]}
    assert done.adding_replicas == {} and done.removing_replicas == {}
    assert done.topic_id == topic.topic_id


def test_leader_imbalance_per_preferred_broker() -> None:
    assignments = {("t", p): [p % 2, 1 - p % 2] for p in range(10)}  # 5 preferred each
    leaders = {tp: 1 for tp in assignments}  # broker 1 leads everything
    imbalance = rs.leader_imbalance(assignments, leaders)
    assert imbalance[0] == (1.0, [("t", p) for p in range(0, 10, 2)])
    assert imbalance[1] == (0.0, [])
    assert rs.rebalance_candidates(assignments, leaders, 10) == [("t", p) for p in (0, 2, 4, 6, 8)]


def test_imbalance_at_the_threshold_is_tolerated() -> None:
    # Kafka compares strictly: 1 of 10 away (10 %) with the default 10 % is fine.
    assignments = {("t", p): [0, 1] for p in range(10)}
    leaders = {tp: 0 for tp in assignments}
    leaders[("t", 3)] = 1
    assert rs.rebalance_candidates(assignments, leaders, 10) == []
    leaders[("t", 4)] = 1
    assert rs.rebalance_candidates(assignments, leaders, 10) == [("t", 3), ("t", 4)]


def test_partitions_without_a_state_are_not_imbalanced() -> None:
    assert rs.rebalance_candidates({("t", 0): [0, 1]}, {}, 0) == []
