"""Tests for tierlog.broker.group.consumer.reconcile: each transition of a member toward its
target (Kafka's CurrentAssignmentBuilder cases)."""

from __future__ import annotations

import uuid

import pytest

from tierlog.broker.group.consumer.errors import FencedMemberEpochError
from tierlog.broker.group.consumer.member import ConsumerGroupMember, MemberState
from tierlog.broker.group.consumer.reconcile import reconcile
from tierlog.broker.group.consumer.topics import topic_id_for

FOO, BAR = topic_id_for("foo"), topic_id_for("bar")


def nobody_owns(topic_id: uuid.UUID, partition: int) -> bool:
    return False


def owned_by_others(*tps: tuple[uuid.UUID, int]):  # type: ignore[no-untyped-def]
    held = set(tps)
    return lambda t, p: (t, p) in held


def member(
    epoch: int = 10,
    state: MemberState = MemberState.STABLE,
    assigned: dict[uuid.UUID, frozenset[int]] | None = None,
    pending: dict[uuid.UUID, frozenset[int]] | None = None,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "m",
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        state=state,
        assigned=assigned or {},
        pending_revocation=pending or {},
    )


def test_stable_at_the_target_epoch_stays_as_it_is() -> None:
    m = member(assigned={FOO: frozenset({0})})
    assert reconcile(m, 10, {FOO: frozenset({0, 1})}, nobody_owns, []) is m


def test_only_new_partitions_move_straight_to_the_target_epoch() -> None:
    m = member(assigned={FOO: frozenset({0})})
    new = reconcile(m, 11, {FOO: frozenset({0, 1}), BAR: frozenset({2})}, nobody_owns, None)
    assert new.state is MemberState.STABLE
    assert (new.member_epoch, new.previous_member_epoch) == (11, 10)
    assert new.assigned == {FOO: frozenset({0, 1}), BAR: frozenset({2})}
    assert new.pending_revocation == {}


def test_partitions_to_give_up_are_revoked_first_at_the_same_epoch() -> None:
    m = member(assigned={FOO: frozenset({0, 1}), BAR: frozenset({0})})
    new = reconcile(m, 11, {FOO: frozenset({1, 2})}, nobody_owns, [(FOO, 0), (FOO, 1), (BAR, 0)])
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.member_epoch == 10  # the epoch waits for the revocation
    assert new.assigned == {FOO: frozenset({1})}  # FOO-2 is not given yet
    assert new.pending_revocation == {FOO: frozenset({0}), BAR: frozenset({0})}


def test_revocation_already_done_by_the_member_skips_the_wait() -> None:
    m = member(assigned={FOO: frozenset({0, 1})})
    new = reconcile(m, 11, {FOO: frozenset({1})}, nobody_owns, [(FOO, 1)])
    assert new.state is MemberState.STABLE
    assert new.member_epoch == 11
    assert new.assigned == {FOO: frozenset({1})}


def test_unrevoked_waits_while_the_member_still_reports_a_revoked_partition() -> None:
    m = member(
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned={FOO: frozenset({1})},
        pending={FOO: frozenset({0})},
    )
    assert reconcile(m, 11, {FOO: frozenset({1, 2})}, nobody_owns, [(FOO, 0), (FOO, 1)]) is m
    # A heartbeat that does not say what it owns cannot prove the revocation either.
    assert reconcile(m, 11, {FOO: frozenset({1, 2})}, nobody_owns, None) is m
    acknowledged = reconcile(m, 11, {FOO: frozenset({1, 2})}, nobody_owns, [(FOO, 1)])
    assert acknowledged.state is MemberState.STABLE
    assert acknowledged.member_epoch == 11
    assert acknowledged.assigned == {FOO: frozenset({1, 2})}
    assert acknowledged.pending_revocation == {}


def test_partitions_still_owned_elsewhere_are_unreleased() -> None:
    m = member(assigned={FOO: frozenset({0})})
    new = reconcile(m, 11, {FOO: frozenset({0, 1, 2})}, owned_by_others((FOO, 2)), [(FOO, 0)])
    assert new.state is MemberState.UNRELEASED_PARTITIONS
    assert new.member_epoch == 11  # moved to the target epoch with what is free
    assert new.assigned == {FOO: frozenset({0, 1})}
    # Released later: the next step hands it over.
    later = reconcile(new, 11, {FOO: frozenset({0, 1, 2})}, nobody_owns, [(FOO, 0), (FOO, 1)])
    assert later.state is MemberState.STABLE
    assert later.assigned == {FOO: frozenset({0, 1, 2})}


def test_waiting_only_on_others_moves_the_epoch_with_nothing_new() -> None:
    m = member(assigned={FOO: frozenset({0})})
    new = reconcile(m, 11, {FOO: frozenset({0, 1})}, owned_by_others((FOO, 1)), [(FOO, 0)])
    assert new.state is MemberState.UNRELEASED_PARTITIONS
    assert new.member_epoch == 11
    assert new.assigned == {FOO: frozenset({0})}


def test_revocation_comes_before_waiting_for_others() -> None:
    m = member(assigned={FOO: frozenset({0})})
    new = reconcile(m, 11, {BAR: frozenset({0})}, owned_by_others((BAR, 0)), [(FOO, 0)])
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.assigned == {}


def test_unknown_state_with_partitions_is_fenced() -> None:
    m = member(state=MemberState.UNKNOWN, assigned={FOO: frozenset({0})})
    with pytest.raises(FencedMemberEpochError, match="unknown state"):
        reconcile(m, 11, {FOO: frozenset({0})}, nobody_owns, [(FOO, 0)])
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 11, {FOO: frozenset({0})}, nobody_owns, None)
    restarted = reconcile(m, 11, {FOO: frozenset({0})}, nobody_owns, [])
    assert restarted.state is MemberState.STABLE and restarted.member_epoch == 11


def test_state_values_written_by_a_newer_version_read_as_unknown() -> None:
    assert MemberState.from_value(1) is MemberState.UNREVOKED_PARTITIONS
    assert MemberState.from_value(42) is MemberState.UNKNOWN
