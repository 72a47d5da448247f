"""Incremental cooperative reconciliation (KIP-848): one member's step toward its target.

Kafka's ``CurrentAssignmentBuilder``. Given a member, the target assignment (and its epoch)
the assignor computed for it, who currently owns each partition, and the partitions the
member reports owning in its heartbeat, ``reconcile`` returns the member's next state. The
rules that make the protocol safe:

* A partition is revoked before it is given to anyone else. Partitions the member holds
  but the target does not give it become *pending revocation*; the member stays at its
  epoch (UNREVOKED_PARTITIONS) until a heartbeat no longer reports them.
* A partition another member still owns (assigned or pending revocation, at any epoch) is
  not given yet: the member moves to the target epoch with what is free and waits
  (UNRELEASED_PARTITIONS); a later heartbeat hands over what has been released.
* The member epoch only moves to the target epoch once nothing is left to revoke, so a
  member at epoch E owns only partitions no other member at epoch E owns.

With the owners taken from the group (``ConsumerGroup.partition_owner``), no partition is
ever owned by two members at once; ``tests/broker/group/consumer/test_simulation.py``
checks that over random runs.

``owned`` None means the heartbeat did not say (a lightweight heartbeat): the member is then
assumed to still own what it was asked to revoke.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

from tierlog.broker.group.consumer.errors import FencedMemberEpochError
from tierlog.broker.group.consumer.member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    TopicPartition,
)

# Whether a partition is owned by any member right now (Kafka's currentPartitionEpoch != -1).
IsOwned = Callable[[uuid.UUID, int], bool]


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    is_owned: IsOwned,
    owned: Iterable[TopicPartition] | None,
) -> ConsumerGroupMember:
    """The member's next state on its way to ``target`` (the same object if none).

    Raises:
        FencedMemberEpochError: the member is in a state this version does not know and
            still reports partitions; it must rejoin with none.
    """
    owned_set = None if owned is None else set(owned)
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, is_owned, owned_set)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned_set, member.pending_revocation):
            return member
        return _next(member, member.member_epoch, target_epoch, target, is_owned, owned_set)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, is_owned, owned_set)
    # UNKNOWN: written by a newer version; start over from nothing.
    if owned_set is None or owned_set:
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, is_owned, owned_set)


def _still_owns(owned: set[TopicPartition] | None, revoking: Assignment) -> bool:
    if owned is None:
        return True
    return any(p in revoking.get(t, ()) for t, p in owned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    is_owned: IsOwned,
    owned: set[TopicPartition] | None,
) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    to_add: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - keep
        add = wanted - keep
        free = frozenset(p for p in add if not is_owned(topic_id, p))
        unreleased = unreleased or len(free) != len(add)
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            to_add[topic_id] = free

    def moved(
        state: MemberState, epoch: int, parts: Assignment, pending: Assignment
    ) -> ConsumerGroupMember:
        # Kafka's updateMemberEpoch: the previous epoch is the one being left.
        return replace(
            member,
            state=state,
            previous_member_epoch=member.member_epoch,
            member_epoch=epoch,
            assigned=parts,
            pending_revocation=pending,
        )

    if revoking and _still_owns(owned, revoking):
        # Revoke first: stay at the current epoch until the member gives them up.
        return moved(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic_id, parts in to_add.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return moved(state, target_epoch, assigned, {})
